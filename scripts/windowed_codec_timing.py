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
