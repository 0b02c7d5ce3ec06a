"""Codec cost of Orpheus streaming at real size: SNAC 24 kHz (published config), random weights.

Prints milliseconds of decoder compute per second of audio for a full-sequence
decode and for the windowed streaming scheme (look-back 1, look-ahead 2 frames)
at several chunk sizes and batch sizes (rows decoded together in one step).
The window re-decodes context frames, so small chunks cost more per second.

    python scripts/bench_snac_codec.py [--threads 2] [--seconds 4] [--dtype float32]
"""

from __future__ import annotations

import argparse

import torch
from windowed_codec_timing import print_decode_costs


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

    torch.manual_seed(0)
    snac = SNAC(**REAL_SNAC).eval().to(getattr(torch, args.dtype))
    drop_noise(snac)
    codec = SnacCodec(snac, lookback=1, lookahead=2)
    params = sum(p.numel() for p in snac.decoder.parameters()) / 1e6
    header = f"SNAC 24 kHz decoder {params:.1f} M parameters, {args.dtype}, {args.threads} threads"
    print_decode_costs(
        codec,
        header,
        codebook_size=4096,
        seconds=args.seconds,
        batches=args.batches,
        chunks=args.chunks,
        warmup_frames=4,
    )


if __name__ == "__main__":
    main()
