"""How many processes a Qwen3-TTS engine runs on CPU and their summed PSS, after a few requests.

    python scripts/stage_processes.py CKPT_DIR [--requests 2] [--set KEY=VALUE ...]

Starts omni's vLLM-Omni engine (`--profile qwen3-tts`) in this process on CKPT_DIR (a tiny Base
checkpoint with a stopping talker is built there when the folder does not exist), runs --requests
Base requests one after another, then prints the process count of this process's tree and their
summed PSS (shared pages split between the processes that map them), per process and in total.
Written to compare code versions: it uses only APIs older versions have (run it with another
checkout's omnicli on PYTHONPATH for the "before" figures).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import numpy as np
import psutil

from omnicli.engine.request import TTSRequest
from omnicli.profile import load_profile
from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts
from omnicli.vllm_omni.engine import OmniEngine


def tree() -> list[tuple[int, str, int]]:
    """(pid, name, PSS bytes) of this process and its descendants."""
    me = psutil.Process(os.getpid())
    rows = []
    for p in [me, *me.children(recursive=True)]:
        try:
            rows.append((p.pid, " ".join(p.cmdline()[:3])[:70] or p.name(), p.memory_full_info().pss))
        except psutil.Error:
            continue
    return rows


async def main(args: argparse.Namespace) -> None:
    ckpt = Path(args.checkpoint)
    if not ckpt.exists():
        build_tiny_qwen3_tts(ckpt, kind="base", stop_frames=25)
    resolved = load_profile("qwen3-tts", overrides=[f"model_path={ckpt}", *args.set])
    t0 = time.perf_counter()
    engine = await OmniEngine.start(resolved)
    print(f"engine ready in {time.perf_counter() - t0:.1f} s")
    sr = 24000
    ref = (0.1 * np.sin(2 * np.pi * 220 * np.arange(sr) / sr)).astype(np.float32)
    try:
        for i in range(args.requests):
            request = TTSRequest(request_id=f"r{i}", text="Hello there, this is a test.", ref_audio=ref,
                                 ref_sample_rate=sr, ref_text="A reference.", max_new_tokens=40, seed=i)
            samples = 0
            async for chunk in engine.generate(request):
                samples += len(chunk.pcm)
            print(f"request {i}: {samples / sr:.2f} s of audio")
        rows = tree()
        for pid, name, pss in rows:
            print(f"  pid {pid:>7}  PSS {pss / 2**20:8.1f} MiB  {name}")
        print(f"processes {len(rows)}, summed PSS {sum(r[2] for r in rows) / 2**30:.2f} GiB "
              f"(load average {os.getloadavg()[0]:.1f})")
        print(f"cpu stages: {engine.stats().extra.get('cpu_stages')}")
    finally:
        await engine.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], help="profile override KEY=VALUE")
    asyncio.run(main(parser.parse_args()))
