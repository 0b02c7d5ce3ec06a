"""Codec cost of Orpheus streaming at real size: SNAC 24 kHz (published config), random weights.

Prints milliseconds of decoder compute per second of audio for a full-sequence
decode and for the windowed streaming scheme (look-back 1, look-ahead 2 frames)
at several chunk sizes and batch sizes (rows decoded together in one step).
The window re-decodes context frames, so small chunks cost more per second.

    python scripts/bench_snac_codec.py [--threads 2] [--seconds 4] [--dtype float32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0, help="audio per request")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--chunks", default="1,4,16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from snac import SNAC

    from omnicli.engine.models.orpheus import REAL_SNAC
    from omnicli.engine.models.snac_codec import SnacCodec, drop_noise
    from omnicli.engine.windowed import WindowChunker, WindowedRunner

    torch.manual_seed(0)
    snac = SNAC(**REAL_SNAC).eval().to(getattr(torch, args.dtype))
    drop_noise(snac)
    codec = SnacCodec(snac, lookback=1, lookahead=2)
    frames = round(args.seconds * codec.sample_rate / codec.hop)
    audio_s = frames * codec.hop / codec.sample_rate
    params = sum(p.numel() for p in snac.decoder.parameters()) / 1e6
    print(f"SNAC 24 kHz decoder {params:.1f} M parameters, {args.dtype}, {args.threads} threads, {frames} frames ({audio_s:.2f} s) per request")
    for batch in [int(b) for b in args.batches.split(",")]:
        codes = np.random.default_rng(0).integers(0, 4096, (batch, frames, 7))
        with torch.no_grad():
            codec.decode_frames(torch.from_numpy(codes[:, :4]))  # warm-up
            t0 = time.perf_counter()
            codec.decode_frames(torch.from_numpy(codes))
            full = time.perf_counter() - t0
        print(f"batch {batch:2d}  full decode: {1000 * full / (batch * audio_s):7.1f} ms per audio second")
        for size in [int(c) for c in args.chunks.split(",")]:
            runner = WindowedRunner(codec, batch, max_chunk_frames=size)
            chunkers = [WindowChunker(7, size, size, lookahead=codec.lookahead) for _ in range(batch)]
            steps = [ch.feed(c) for ch, c in zip(chunkers, codes)]
            for ch, st in zip(chunkers, steps):
                st.append(ch.flush())
            t0 = time.perf_counter()
            for i in range(len(steps[0])):
                last = i == len(steps[0]) - 1
                runner.execute(list(range(batch)), [st[i] for st in steps], last=[last] * batch)
            took = time.perf_counter() - t0
            print(f"batch {batch:2d}  stream, chunks of {size:2d}: {1000 * took / (batch * audio_s):7.1f} ms per audio second"
                  f" ({len(steps[0])} steps)")


if __name__ == "__main__":
    main()
