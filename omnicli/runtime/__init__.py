"""Process plumbing every command shares: signals (StopSignals), orphaned engine processes (OrphanGuard and
its watcher), vLLM's start-up noise (quiet_vllm), the cache folder (cache_dir)."""
