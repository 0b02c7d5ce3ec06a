"""Codec cost of NeuTTS Air streaming at real size: NeuCodec's decoder (published dimensions), random weights.

Prints milliseconds of decoder compute per second of audio for a full-sequence
decode and for the reference's streaming scheme (chunks of 25 frames decoded
with 51 frames of look-back and 5 of look-ahead, 2-frame cross-fade), at
several batch sizes (rows decoded together in one step). Only the decoder is
timed; the semantic encoder (w2v-BERT) is built with one layer to save memory,
which leaves every decoder dimension at its published size.

    python scripts/bench_neucodec.py [--threads 2] [--seconds 6] [--dtype float32] [--batches 1,8]
"""

from __future__ import annotations

import argparse

import torch
from windowed_codec_timing import print_decode_costs, random_neucodec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="audio per request")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--chunks", default="25")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from omnicli.engine.models import neutts

    codec = random_neucodec(args.dtype)
    model = codec.model
    params = sum(p.numel() for p in model.acoustic_decoder.parameters()) / 1e6
    header = f"NeuCodec decoder {params:.1f} M parameters, {args.dtype}, {args.threads} threads"
    print_decode_costs(
        codec,
        header,
        codebook_size=neutts.CODEBOOK_SIZE,
        seconds=args.seconds,
        batches=args.batches,
        chunks=args.chunks,
        warmup_frames=30,
    )


if __name__ == "__main__":
    main()
