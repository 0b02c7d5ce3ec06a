"""What every SIM / MOS scorer offers, and the errors they raise.

A scorer turns 16 kHz mono clips of generated speech (plus, for SIM, the
row's reference audio) into named figures. It is loaded once per run and
scores a batch at a time; a batch that raises is retried clip by clip by the
caller, so one bad clip fails alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnicli.errors import UsageError

SAMPLE_RATE = 16_000  # every scorer gets 16 kHz mono float32


class ScorerError(RuntimeError):
    """A scorer could not be set up or run (a broken checkpoint, a runtime failure)."""


class ScorerSetupError(ScorerError, UsageError):
    """The request itself cannot be met: unknown backend, weights not on this
    machine, package not installed. A usage error."""


@dataclass
class ScoreItem:
    utt: str
    clip: np.ndarray  # generated audio, 16 kHz mono float32
    reference: Path | None = None  # the row's reference (prompt) audio, for SIM


class Scorer(ABC):
    """`metric` is "sim" or "mos"; `keys` are the per-utterance columns `score` fills."""

    metric: str = ""
    backend: str = ""
    keys: tuple[str, ...] = ()
    needs_reference: bool = False
    min_seconds: float = 0.0  # shorter clips get a reason instead of a score

    @abstractmethod
    def score(self, items: Sequence[ScoreItem]) -> list[dict[str, float]]:
        """One {key: value} per item, in order. Any failure raises (the caller retries one by one)."""

    @abstractmethod
    def describe(self) -> dict:
        """Backend, model and how to read the numbers, recorded in the summary."""

    def warm_up(self) -> None:
        """Runs the model once on a synthetic clip, so one-time costs (JIT, allocation)
        stay out of the per-utterance CPU time. Failures are ignored: real clips will report them."""
        rng = np.random.default_rng(0)
        tone = 0.3 * np.sin(2 * np.pi * 180 * np.arange(SAMPLE_RATE * 2) / SAMPLE_RATE)
        clip = (tone + 0.01 * rng.standard_normal(tone.shape[0])).astype(np.float32)
        try:
            self._warm_up(clip)
        except Exception:
            pass

    def _warm_up(self, clip: np.ndarray) -> None:
        self.score([ScoreItem("warm-up", clip)])


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    if denom == 0.0:
        raise ScorerError("zero-length speaker embedding (no voiced audio?)")
    return float(np.dot(a, b) / denom)
