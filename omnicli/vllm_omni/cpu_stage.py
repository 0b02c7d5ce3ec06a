"""A CPU run's per-stage settings in the deploy overlay: dtype, threads, KV cache, one process per stage.

- **dtype**: a stage at `auto` runs in bfloat16 where the CPU has native bf16 and in float32 elsewhere
  (omnicli/runtime/cpu_dtype.py says why); an explicit bfloat16 without it is kept, with a warning.
- **threads**: each stage's worker sets its own OpenMP/torch thread count (cpu_workers.py reads
  `additional_config[THREADS_KEY]`); `0` in the profile splits the machine's cores between the two
  stages. Left alone, every stage process runs as many threads as there are cores, and the stages
  stall each other.
- **KV cache**: at least one `max_model_len` sequence of the talker in the chosen dtype (a float32
  Qwen3-TTS 0.6B talker needs 0.88 GiB at 4096 tokens, its bfloat16 one 0.44), read from the
  checkpoint's config when it is known.
- **one process per stage**: vLLM's CPU platform turns a one-worker stage's `uni` executor into its
  multiprocess one (a second process per stage, 0.6-1 GB, and a shared-memory reader that spins
  after every message). It compares the backend's name with "uni"; the executor's class path is
  another spelling vLLM's `Executor.get_class` accepts, so the worker stays in the stage's process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnicli.profile.cpu_stages import CpuStages, resolve_cpu_stages
from omnicli.profile.schema import Profile
from omnicli.runtime.cpu_dtype import CpuBf16, probe_bf16

THREADS_KEY = "omni_cpu_threads"  # vLLM's free-form `additional_config`, read by our CPU worker
IN_PROCESS_EXECUTOR = "vllm.v1.executor.uniproc_executor.UniProcExecutor"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
MIB = 1 << 20


def apply_cpu_stages(p: Profile, talker: dict[str, Any], codec: dict[str, Any], checkpoint: Path | None,
                     probe: Callable[[], CpuBf16] = probe_bf16) -> CpuStages:
    """Writes the CPU choices into the talker's and the codec's overlay keys; returns them."""
    stages = resolve_cpu_stages(p, probe=probe)
    talker["dtype"], codec["dtype"] = stages.talker.dtype, stages.codec.dtype
    for keys, threads in ((talker, stages.talker_threads), (codec, stages.codec_threads)):
        keys["additional_config"] = {THREADS_KEY: threads}
        keys["distributed_executor_backend"] = IN_PROCESS_EXECUTOR
    need = talker_kv_bytes(checkpoint, stages.talker.dtype, p.talker.max_model_len)
    if need is not None and need > talker.get("kv_cache_memory_bytes", 0):
        talker["kv_cache_memory_bytes"] = need
    return stages


def talker_kv_bytes(checkpoint: Path | None, dtype: str, max_model_len: int) -> int | None:
    """Bytes of KV cache one `max_model_len` sequence of the checkpoint's talker takes (MiB-rounded up);
    None when the checkpoint or its talker sizes are unknown."""
    if checkpoint is None or dtype not in DTYPE_BYTES:
        return None
    try:
        config = json.loads((Path(checkpoint) / "config.json").read_text(encoding="utf-8"))
        t = config.get("talker_config") or config
        layers, heads = int(t["num_hidden_layers"]), int(t["num_key_value_heads"])
        head_dim = int(t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"])
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    raw = 2 * layers * heads * head_dim * DTYPE_BYTES[dtype] * max_model_len  # keys and values
    return -(-raw // MIB) * MIB
