"""Stage-0 only: talker tokens/s at batch 1, 16 and 64 for a profile with overrides.

    .venv/bin/python scripts/bench_talker.py talker.dtype=float32
    .venv/bin/python scripts/bench_talker.py talker.dtype=bfloat16 talker.threads=2
    NOSEED=1 ... (no per-request seeds: vLLM then samples the batch in one pass)

Each batch size runs after one warm request; figures are noisy on shared
machines, so compare configurations measured back to back.
"""
import asyncio
import os
import sys
import time

from omnicli.engine.models import load_model
from omnicli.engine.talker import Talker
from omnicli.profile import load_profile

NOSEED = os.environ.get("NOSEED") == "1"


async def run(sets, batches=(1, 16, 64), tokens=80):
    rp = load_profile("default", overrides=sets)
    a = load_model("omni-tiny")
    tk = await Talker.start(str(a.talker_path), a.allowed_token_ids(), rp.profile.talker, platform="cpu", seed=0)
    prompt = a.build_prompt("Hello there this is a test sentence.", "ref text", None)
    out = {}
    try:
        for b in batches:
            async def one(i, b=b):
                n = 0
                async for d in tk.generate(f"r{b}-{i}-{time.time()}", prompt, tokens, None if NOSEED else i):
                    n += len(d.token_ids)
                return n
            await one(-1)  # warm
            t = time.perf_counter()
            ns = await asyncio.gather(*(one(i) for i in range(b)))
            dt = time.perf_counter() - t
            out[b] = sum(ns) / dt
            print(sets, "batch", b, "tok/s", round(out[b], 1), "step ms", round(dt / tokens * 1000, 1), flush=True)
    finally:
        tk.shutdown()

if __name__ == "__main__":
    sets = sys.argv[1:]
    asyncio.run(run(sets))
