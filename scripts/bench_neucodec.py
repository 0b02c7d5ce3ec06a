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
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="audio per request")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--chunks", default="25")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import NeuCodecConfig, NeuCodecModel

    from omnicli.engine.models import neutts
    from omnicli.engine.models.neucodec_codec import NeuCodecCodec
    from omnicli.engine.windowed import WindowChunker, WindowedRunner

    torch.manual_seed(0)
    cfg = NeuCodecConfig()
    cfg.semantic_model_config.num_hidden_layers = 1  # not timed: the decoder keeps its published size
    model = NeuCodecModel(cfg).eval()
    neutts._randomize(model)
    model = model.to(getattr(torch, args.dtype))
    codec = NeuCodecCodec(model, None, lookback=neutts.LOOKBACK_FRAMES, lookahead=neutts.LOOKAHEAD_FRAMES, overlap=neutts.OVERLAP_FRAMES)
    frames = round(args.seconds * codec.sample_rate / codec.hop)
    audio_s = frames * codec.hop / codec.sample_rate
    params = sum(p.numel() for p in model.acoustic_decoder.parameters()) / 1e6
    print(f"NeuCodec decoder {params:.1f} M parameters, {args.dtype}, {args.threads} threads, {frames} frames ({audio_s:.2f} s) per request")
    for batch in [int(b) for b in args.batches.split(",")]:
        codes = np.random.default_rng(0).integers(0, neutts.CODEBOOK_SIZE, (batch, frames, 1))
        with torch.no_grad():
            codec.decode_frames(torch.from_numpy(codes[:, :30]))  # warm-up
            t0 = time.perf_counter()
            codec.decode_frames(torch.from_numpy(codes))
            full = time.perf_counter() - t0
        print(f"batch {batch:2d}  full decode: {1000 * full / (batch * audio_s):7.1f} ms per audio second")
        for size in [int(c) for c in args.chunks.split(",")]:
            runner = WindowedRunner(codec, batch, max_chunk_frames=size)
            chunkers = [WindowChunker(1, size, size, lookahead=codec.lookahead) for _ in range(batch)]
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
