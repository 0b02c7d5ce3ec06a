"""Parity checks of a family's implementation against its reference code.

`omni models verify FAMILY --checkpoint DIR` runs them on DIR/talker and
DIR/codec (a user's real checkpoints, or random-weight ones from
`omni models build-tiny`). Each check reports a figure (max abs difference,
matching token ids); a check whose reference package is not installed is
reported as skipped, never as passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

TEXTS = ("Hello there, how are you today?", "A large size in stockings is hard to sell.", "Numbers 1, 2 and 3; symbols & punctuation!")
# Streaming vs full-sequence decode: the bound a windowed scheme must stay within, relative to the full decode's peak.
STREAM_REL_BOUND = 0.10


@dataclass
class Check:
    name: str
    status: str  # "ok" | "mismatch" | "skipped"
    figure: str
    detail: str = ""


def run(family: str, checkpoint: Path, *, seed: int = 0) -> list[Check]:
    if family == "orpheus":
        from omnicli.engine.models import verify_orpheus

        return verify_orpheus.run(checkpoint, seed=seed)
    if family == "neutts-air":
        from omnicli.engine.models import verify_neutts

        return verify_neutts.run(checkpoint, seed=seed)
    raise ValueError(f"no parity checks for {family!r} (known: orpheus, neutts-air)")


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    n = min(len(a), len(b))
    if len(a) != len(b):
        return float("inf")
    return float(np.max(np.abs(np.asarray(a[:n], np.float64) - np.asarray(b[:n], np.float64)))) if n else 0.0


def boundary_jumps(stream: np.ndarray, full: np.ndarray, boundaries: list[int]) -> tuple[float, float]:
    """Largest sample-to-sample step at chunk boundaries: (streamed, full decode at the same places)."""
    idx = [b for b in boundaries if 0 < b < min(len(stream), len(full))]
    if not idx:
        return 0.0, 0.0
    s = max(abs(float(stream[b]) - float(stream[b - 1])) for b in idx)
    f = max(abs(float(full[b]) - float(full[b - 1])) for b in idx)
    return s, f
