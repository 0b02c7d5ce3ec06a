"""Stage 1 (codec) micro- and engine benchmarks. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_codec.py                 # all parts
    .venv/bin/python scripts/bench_codec.py --part backends --batches 1,8,32
    .venv/bin/python scripts/bench_codec.py --part overhead
    .venv/bin/python scripts/bench_codec.py --part engine --requests 64
    .venv/bin/python scripts/bench_codec.py --part neucodec-geometry --geometries 5+25,5/10/20/40+80

Parts:
  backends  `sdpa` vs `slot` step time of omni-tiny's codec at several batch
            sizes (steady 25-frame chunks, rings already full).
  overhead  time outside model compute per step with 64 active requests:
            the scheduler's decision alone, and the whole stage cycle
            (inbox, scheduling, delivery, bookkeeping) minus runner time.
  engine    the real engine (vLLM talker + codec), N concurrent requests:
            audio-s/s and mean codec batch size with coalescing off versus
            generation_min_batch_size=16, generation_max_wait_ms=12.
  neucodec-geometry
            NeuTTS Air's codec at real size (NeuCodec's published decoder,
            random weights; or --codec-path): codec ms per audio second of a
            full-sequence decode, one request at a time (the reference loop),
            against streaming geometries (FIRST[/NEXT...]+STEADY chunk sizes,
            51 look-back and 5 look-ahead frames), requests in lockstep, in
            alternating rounds with ratios and bootstrap 90% intervals.

On a shared machine every figure is noisy: compare figures from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
import torch

from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import Chunk, CodecScheduler
from omnicli.engine.codec_stage import CodecStage
from omnicli.engine.models import load_model

STEADY = 25  # frames per steady chunk (the profiles' codec_chunk_frames)


def _codes(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, k))


def bench_backends(batches: list[int], reps: int) -> None:
    decoder = load_model("omni-tiny").codec.decoder
    k = decoder.cfg.num_codebooks
    rng = np.random.default_rng(0)
    backends = ("sdpa", "slot")
    print(f"\n[backends] omni-tiny codec, float32, {torch.get_num_threads()} thread(s), {STEADY}-frame chunks, "
          f"contexts {decoder.cfg.contexts}; backends alternate step by step, median of {reps} steps each")
    print(f"{'batch':>6} {'backend':>8} {'ms/step':>9} {'ms/frame':>9} {'audio-s/s':>10}")
    for batch in batches:
        slots = list(range(batch))
        runners = {b: CodecRunner(decoder, batch, max_chunk_frames=STEADY, backend=b) for b in backends}
        for _ in range(3):  # fill the rings (largest context: 64 frames) and warm up
            chunks = [_codes(rng, STEADY, k) for _ in slots]
            for runner in runners.values():
                runner.execute(slots, chunks)
        times: dict[str, list[float]] = {b: [] for b in backends}
        for _ in range(reps):  # alternating keeps both backends under the same background load
            chunks = [_codes(rng, STEADY, k) for _ in slots]
            for name, runner in runners.items():
                t0 = time.perf_counter()
                runner.execute(slots, chunks)
                times[name].append(time.perf_counter() - t0)
        for name in backends:
            ms = statistics.median(times[name]) * 1000
            audio_s = batch * STEADY / 12.5
            print(f"{batch:>6} {name:>8} {ms:>9.2f} {ms / (batch * STEADY):>9.3f} {audio_s / (ms / 1000):>10.1f}")


def bench_overhead(active: int, steps: int) -> None:
    print(f"\n[overhead] {active} active requests, each with a ready {STEADY}-frame chunk every step")
    # The scheduler's decision alone: queue one chunk per request, schedule, mark delivered.
    sched = CodecScheduler(active, active * STEADY)
    for i in range(active):
        sched.open(f"r{i}")
    codes = np.zeros((STEADY, 4), dtype=np.int64)
    per_step = []
    for step in range(2000):
        t0 = time.perf_counter()
        for i in range(active):
            sched.add_chunk(Chunk(f"r{i}", codes, False, float(step)))
        plan = sched.schedule(float(step))
        for row in plan.rows:
            sched.complete(row.request_id)
        per_step.append(time.perf_counter() - t0)
        assert len(plan.rows) == active
    print(
        f"  scheduler (add {active} chunks + schedule + complete): median {statistics.median(per_step) * 1e6:.0f} "
        "us/step"
    )

    # The whole stage cycle around a real runner, minus the runner's time.
    decoder = load_model("omni-tiny").codec.decoder
    runner = CodecRunner(decoder, active, max_chunk_frames=STEADY)
    delivered = []
    stage = CodecStage(runner, CodecScheduler(active, active * STEADY), lambda *a: delivered.append(a))
    rng = np.random.default_rng(0)
    for i in range(active):
        stage.open(f"r{i}")
    for step in range(steps + 1):
        if step == 1:  # the first step warms up
            stage.busy_s = stage.compute_s = 0.0
            stage.steps = 0
        for i in range(active):
            stage.submit(f"r{i}", _codes(rng, STEADY, 4), False)
        stage.cycle()
    overhead = (stage.busy_s - stage.compute_s) / stage.steps
    print(f"  stage cycle outside runner.execute: {overhead * 1e6:.0f} us/step "
          f"(runner.execute {stage.compute_s / stage.steps * 1000:.1f} ms/step, {stage.steps} steps, batch {active})")


async def _engine_run(sets: list[str], texts: list[str]) -> dict:
    from omnicli.engine import Engine
    from omnicli.engine.request import TTSRequest
    from omnicli.profile import load_profile

    engine = await Engine.start(load_profile("cpu", overrides=sets))
    try:
        async def one(i: int, text: str) -> tuple[float, float]:
            samples, first = 0, None
            t0 = time.perf_counter()
            async for chunk in engine.generate(TTSRequest(f"b{i}", text)):  # no per-request seed: see docs/engine.md
                if first is None and chunk.num_samples:
                    first = chunk.t - t0
                samples += chunk.num_samples
            return samples / engine.sample_rate, first or 0.0

        await one(-1, "warm up the engine.")
        before = engine.stats()
        t0 = time.perf_counter()
        results = await asyncio.gather(*(one(i, t) for i, t in enumerate(texts)))
        wall = time.perf_counter() - t0
        stats = engine.stats().minus(before).to_dict()
    finally:
        await engine.close()
    audio = sum(a for a, _ in results)
    return {
        "audio_s": audio,
        "wall_s": wall,
        "audio_s_per_s": audio / wall,
        "mean_first_audio_s": statistics.mean(f for _, f in results),
        "mean_codec_batch": stats["mean_codec_batch_size"],
        "codec_steps": stats["codec_steps"],
        "codec_compute_s": stats["codec_compute_s"],
        "coalescing_waits": stats["coalescing_waits"],
    }


def bench_engine(requests: int) -> None:
    rng = np.random.default_rng(0)
    words = "the quick brown fox jumps over a lazy dog while seven small birds sing softly".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(8, 20)))) + "." for _ in range(requests)]
    base = [f"talker.max_num_seqs={requests}", f"codec.max_num_seqs={requests}"]
    configs = {
        "coalescing off": base,
        "min_batch 16, wait 12 ms": base + ["codec.generation_min_batch_size=16", "codec.generation_max_wait_ms=12"],
    }
    print(f"\n[engine] profile cpu, {requests} concurrent requests ({sum(len(t) for t in texts)} text bytes)")
    print(
        f"{'config':>26} {'audio-s/s':>10} {'wall s':>7} {'audio s':>8} {'1st audio s':>11} {'codec batch':>11} "
        f"{'steps':>6} {'codec s':>8} {'windows':>8}"
    )
    for name, sets in configs.items():
        r = asyncio.run(_engine_run(sets, texts))
        print(
            f"{name:>26} {r['audio_s_per_s']:>10.2f} {r['wall_s']:>7.1f} {r['audio_s']:>8.1f} "
            f"{r['mean_first_audio_s']:>11.2f} "
            f"{r['mean_codec_batch']:>11.2f} {r['codec_steps']:>6} {r['codec_compute_s']:>8.1f} "
            f"{r['coalescing_waits']:>8}"
        )


def bench_neucodec_geometry(args) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from windowed_codec_timing import compare_geometries, random_neucodec

    from omnicli.engine.models import neutts
    from omnicli.engine.models.neucodec_codec import NeuCodecCodec, load_neucodec

    if args.codec_path:
        model, _ = load_neucodec(Path(args.codec_path), dtype=args.dtype)
        codec = NeuCodecCodec(model, None, lookback=neutts.LOOKBACK_FRAMES, lookahead=neutts.LOOKAHEAD_FRAMES,
                              overlap=neutts.OVERLAP_FRAMES)
    else:
        codec = random_neucodec(args.dtype)
    header = f"\n[neucodec-geometry] NeuCodec decoder, {args.dtype}, {torch.get_num_threads()} thread(s)"
    compare_geometries(codec, header, codebook_size=neutts.CODEBOOK_SIZE, frames=args.frames, batch=args.geo_batch,
                       geometries=args.geometries.split(","), rounds=args.rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="backends,overhead,engine", help="comma-separated: backends, overhead, engine")
    ap.add_argument("--batches", default="1,8,32", help="batch sizes for the backend comparison")
    ap.add_argument("--reps", type=int, default=10, help="timed steps per backend and batch size")
    ap.add_argument("--steps", type=int, default=10, help="stage cycles for the overhead measurement")
    ap.add_argument("--requests", type=int, default=64, help="active/concurrent requests (overhead, engine)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the micro-benchmarks (the cpu profile's codec.threads)",
    )
    ap.add_argument("--geometries", default="5+25,5/10/20/40+80,5+100",
                    help="neucodec-geometry: FIRST[/NEXT...]+STEADY chunk sizes, comma-separated (first: the base)")
    ap.add_argument("--frames", type=int, default=100, help="neucodec-geometry: frames per request (50 per second)")
    ap.add_argument("--geo-batch", type=int, default=16, help="neucodec-geometry: requests in lockstep")
    ap.add_argument("--rounds", type=int, default=3, help="neucodec-geometry: alternating rounds")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="neucodec-geometry: dtype")
    ap.add_argument("--codec-path", help="neucodec-geometry: a NeuCodec checkpoint folder (default: random weights)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    parts = set(args.part.split(","))
    if "backends" in parts:
        bench_backends([int(b) for b in args.batches.split(",")], args.reps)
    if "overhead" in parts:
        bench_overhead(args.requests, args.steps)
    if "engine" in parts:
        bench_engine(args.requests)
    if "neucodec-geometry" in parts:
        bench_neucodec_geometry(args)


if __name__ == "__main__":
    main()
