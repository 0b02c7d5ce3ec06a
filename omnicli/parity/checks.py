"""What every family's parity checks share: the result type, test texts, comparisons and decodes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import torch

from omnicli.engine.windowed import WindowChunker, WindowCodec, WindowedRunner

TEXTS = (
    "Hello there, how are you today?",
    "A large size in stockings is hard to sell.",
    "Numbers 1, 2 and 3; symbols & punctuation!",
)
# Streaming vs full-sequence decode: the bound a windowed scheme must stay within, relative to the full decode's peak.
STREAM_REL_BOUND = 0.10

Status = Literal["ok", "mismatch", "skipped"]


@dataclass
class Check:
    name: str
    status: Status
    figure: str
    detail: str = ""


def verdict(ok: bool) -> Status:
    return "ok" if ok else "mismatch"


Setup = TypeVar("Setup")


def run_checks(checks: Sequence[Callable[[Setup], list[Check]]], setup: Setup) -> list[Check]:
    """Each check in order (they may share the setup's random generator, so order is part of the result)."""
    return [c for check in checks for c in check(setup)]


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference; inf when the lengths differ."""
    if len(a) != len(b):
        return float("inf")
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))) if len(a) else 0.0


def boundary_jumps(stream: np.ndarray, full: np.ndarray, boundaries: list[int]) -> tuple[float, float]:
    """Largest sample-to-sample step at chunk boundaries: (streamed, full decode at the same places)."""
    idx = [b for b in boundaries if 0 < b < min(len(stream), len(full))]
    if not idx:
        return 0.0, 0.0
    s = max(abs(float(stream[b]) - float(stream[b - 1])) for b in idx)
    f = max(abs(float(full[b]) - float(full[b - 1])) for b in idx)
    return s, f


def full_decode(codec: WindowCodec, codes: np.ndarray) -> np.ndarray:
    """The whole sequence in one window: what streaming is measured against."""
    with torch.no_grad():
        return codec.decode_frames(torch.from_numpy(np.asarray(codes, np.int64))[None]).float().cpu().numpy()[0]


def stream_decode(
    codec: WindowCodec, codes: np.ndarray, sizes: Sequence[int], slot_runner: WindowedRunner | None = None
) -> np.ndarray:
    """Streams `codes` through a runner in chunks of `sizes` (then the last size repeated)."""
    runner = slot_runner or WindowedRunner(codec, 1, max_chunk_frames=max(sizes))
    chunker = WindowChunker(codec.num_codebooks, sizes[0], sizes[-1], list(sizes), lookahead=codec.lookahead)
    parts = [runner.execute([0], [c], last=[False])[0] for c in chunker.feed(codes)]
    rest = chunker.flush()
    if len(rest):
        parts.append(runner.execute([0], [rest], last=[True])[0])
    runner.reset_slot(0)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def stream_batched(runner: WindowedRunner, seqs: list[np.ndarray], size: int, lookahead: int) -> list[np.ndarray]:
    """Every request advances one chunk per step, all in the same step (one batched decode)."""
    chunkers = [WindowChunker(seqs[0].shape[1], size, size, lookahead=lookahead) for _ in seqs]
    pending = [ch.feed(s) for ch, s in zip(chunkers, seqs)]
    for ch, p in zip(chunkers, pending):
        rest = ch.flush()
        if len(rest):
            p.append(rest)
    out: list[list[np.ndarray]] = [[] for _ in seqs]
    for step in range(max(len(p) for p in pending)):
        rows = [i for i, p in enumerate(pending) if step < len(p)]
        pcm = runner.execute(rows, [pending[i][step] for i in rows], last=[step == len(pending[i]) - 1 for i in rows])
        for i, a in zip(rows, pcm):
            out[i].append(a)
    return [np.concatenate(o) for o in out]
