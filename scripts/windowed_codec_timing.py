"""The timing loop shared by bench_snac_codec.py and bench_neucodec.py: a windowed
codec's cost, in milliseconds of decoder compute per second of audio, for a
full-sequence decode and for streaming through WindowChunker + WindowedRunner."""

from __future__ import annotations

import time

import numpy as np
import torch


def print_decode_costs(
    codec, header: str, *, codebook_size: int, seconds: float, batches: str, chunks: str, warmup_frames: int
) -> None:
    """`header` names the decoder; `batches`/`chunks`: comma-separated batch sizes and
    chunk sizes in frames (the scripts' options)."""
    from omnicli.engine.windowed import WindowChunker, WindowedRunner

    frames = round(seconds * codec.sample_rate / codec.hop)
    audio_s = frames * codec.hop / codec.sample_rate
    print(f"{header}, {frames} frames ({audio_s:.2f} s) per request")
    for batch in [int(b) for b in batches.split(",")]:
        codes = np.random.default_rng(0).integers(0, codebook_size, (batch, frames, codec.num_codebooks))
        with torch.no_grad():
            codec.decode_frames(torch.from_numpy(codes[:, :warmup_frames]))
            t0 = time.perf_counter()
            codec.decode_frames(torch.from_numpy(codes))
            full = time.perf_counter() - t0
        print(f"batch {batch:2d}  full decode: {1000 * full / (batch * audio_s):7.1f} ms per audio second")
        for size in [int(c) for c in chunks.split(",")]:
            runner = WindowedRunner(codec, batch, max_chunk_frames=size)
            chunkers = [WindowChunker(codec.num_codebooks, size, size, lookahead=codec.lookahead) for _ in range(batch)]
            steps = [ch.feed(c) for ch, c in zip(chunkers, codes)]
            for ch, st in zip(chunkers, steps):
                st.append(ch.flush())
            t0 = time.perf_counter()
            for i in range(len(steps[0])):
                last = i == len(steps[0]) - 1
                runner.execute(list(range(batch)), [st[i] for st in steps], last=[last] * batch)
            took = time.perf_counter() - t0
            print(
                f"batch {batch:2d}  stream, chunks of {size:2d}: {1000 * took / (batch * audio_s):7.1f} ms per audio "
                "second"
                f" ({len(steps[0])} steps)"
            )


def parse_geometry(spec: str) -> tuple[list[int], int]:
    """'5/10/20+80' -> ([5, 10, 20], 80): the first chunks' sizes (the chunker's ramp), then the steady size;
    '5+25' is a first chunk of 5 and steady chunks of 25 (the shipped profiles' geometry)."""
    head, _, steady = spec.partition("+")
    ramp = [int(x) for x in head.split("/") if x]
    if not ramp or not steady:
        raise ValueError(f"geometry {spec!r}: expected FIRST[/NEXT...]+STEADY, e.g. 5+25 or 5/10/20+80")
    return ramp, int(steady)


def stream_cost(codec, codes: np.ndarray, ramp: list[int], steady: int) -> tuple[float, int]:
    """Streams every row of `codes` (B, n, K) in lockstep through one WindowedRunner with the chunker's
    geometry (what the engine's codec stage does when B requests advance together): (seconds inside
    `execute`, frames decoded including look-back and look-ahead re-reads)."""
    from omnicli.engine.windowed import WindowChunker, WindowedRunner

    batch = len(codes)
    runner = WindowedRunner(codec, batch, max_chunk_frames=max(*ramp, steady))
    chunkers = [WindowChunker(codec.num_codebooks, ramp[0], steady, ramp, lookahead=codec.lookahead)
                for _ in range(batch)]
    steps = [ch.feed(c) for ch, c in zip(chunkers, codes)]
    for ch, st in zip(chunkers, steps):
        if len(rest := ch.flush()):
            st.append(rest)
    took, decoded, done = 0.0, 0, 0
    with torch.no_grad():
        for i in range(len(steps[0])):
            last = i == len(steps[0]) - 1
            chunks = [st[i] for st in steps]
            window = min(codec.lookback, done) + len(chunks[0])  # frames each row's window decodes
            t0 = time.perf_counter()
            runner.execute(list(range(batch)), chunks, last=[last] * batch)
            took += time.perf_counter() - t0
            decoded += batch * window
            done += len(chunks[0]) - (0 if last else codec.lookahead)
    return took, decoded


def compare_geometries(codec, header: str, *, codebook_size: int, frames: int, batch: int, geometries: list[str],
                       rounds: int) -> None:
    """Codec ms per audio second of a full-sequence decode (one request at a time, as the reference loop
    decodes) and of each streaming geometry, in alternating rounds (omnicli/benchmark/compare.py), with
    each geometry's ratio to the full decode and to the first geometry (bootstrap 90% intervals)."""
    import os

    from omnicli.benchmark.compare import ratio_summary, run_interleaved

    audio_s = frames * codec.hop / codec.sample_rate
    rng = np.random.default_rng(0)
    reread: dict[str, float] = {}

    def full() -> float:
        codes = rng.integers(0, codebook_size, (batch, frames, codec.num_codebooks))
        t0 = time.perf_counter()
        with torch.no_grad():
            for row in codes:
                codec.decode_frames(torch.from_numpy(row[None]))
        return 1000 * (time.perf_counter() - t0) / (batch * audio_s)

    def streamed(spec: str):
        ramp, steady = parse_geometry(spec)

        def one() -> float:
            codes = rng.integers(0, codebook_size, (batch, frames, codec.num_codebooks))
            took, decoded = stream_cost(codec, codes, ramp, steady)
            reread[spec] = decoded / (batch * frames)
            return 1000 * took / (batch * audio_s)
        return one

    phases = {"full decode, 1 row at a time": full, **{f"stream {g}": streamed(g) for g in geometries}}
    for run in phases.values():  # warm-up: first-call allocations, not timed
        run()
    print(f"{header}; {batch} requests in lockstep, {frames} frames ({audio_s:.2f} s) each, {rounds} alternating "
          f"rounds; load average {os.getloadavg()[0]:.1f} at start")
    res = run_interleaved(phases, rounds)
    ref = res["full decode, 1 row at a time"]
    first = res[f"stream {geometries[0]}"]
    for name, p in res.items():
        extra = ""
        if name.startswith("stream "):
            spec = name.removeprefix("stream ")
            extra = f"; frames decoded per frame {reread[spec]:.2f}; vs full {ratio_summary(p.values, ref.values)}"
            if spec != geometries[0]:
                extra += f"; vs {geometries[0]} {ratio_summary(p.values, first.values)}"
        print("  " + p.describe(" ms per audio-s", digits=1) + extra)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


def random_neucodec(dtype: str):
    """A NeuCodec at its published decoder size with seeded random weights (semantic encoder cut to one layer: it
    is not timed), wrapped as the engine's windowed codec with the family's window constants."""
    from transformers import NeuCodecConfig, NeuCodecModel

    from omnicli.engine.models import neutts
    from omnicli.engine.models.neucodec_codec import NeuCodecCodec

    torch.manual_seed(0)
    cfg = NeuCodecConfig()
    cfg.semantic_model_config.num_hidden_layers = 1
    model = NeuCodecModel(cfg).eval()
    neutts._randomize(model)
    model = model.to(getattr(torch, dtype))
    return NeuCodecCodec(
        model, None, lookback=neutts.LOOKBACK_FRAMES, lookahead=neutts.LOOKAHEAD_FRAMES, overlap=neutts.OVERLAP_FRAMES
    )
