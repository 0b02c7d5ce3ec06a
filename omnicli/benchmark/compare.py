"""Ratios that hold up on a noisy machine: alternating rounds, medians, bootstrap intervals.

A ratio between two phases run one after the other measures the machine's
load drift as much as the phases (two runs of one script here disagreed by
1.6x). So the compared phases run in alternating rounds (A B A B ...), each
phase is summarized by its median and spread, and the ratio of medians gets a
bootstrap interval: resample each phase's rounds with replacement, take the
ratio of the resampled medians, keep the central `confidence` share. A ratio
whose interval contains 1.0 is "no difference measured", never a gain.

    rounds = run_interleaved({"engine": run_engine, "reference": run_reference}, rounds=3)
    print(ratio_estimate(rounds["engine"].values, rounds["reference"].values).describe())
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

MIN_ROUNDS = 3  # fewer rounds than this give no usable interval


@dataclass
class PhaseRounds:
    """One phase's per-round figures and the machine's 1-minute load average around each round."""

    name: str
    values: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        return (min(self.values), max(self.values)) if self.values else (float("nan"), float("nan"))

    @property
    def mean_load(self) -> float:
        return statistics.fmean(self.load) if self.load else float("nan")

    def describe(self, unit: str = "", digits: int = 3) -> str:
        lo, hi = self.spread
        return (f"{self.name}: median {self.median:.{digits}f}{unit} (min {lo:.{digits}f}, max {hi:.{digits}f}, "
                f"{len(self.values)} rounds, load {self.mean_load:.1f})")


@dataclass(frozen=True)
class RatioEstimate:
    """median(a) / median(b) with a bootstrap interval at `confidence`."""

    ratio: float
    low: float
    high: float
    confidence: float

    @property
    def measured(self) -> bool:
        """True when the interval excludes 1.0: a difference was measured."""
        return not (self.low <= 1.0 <= self.high)

    def describe(self, digits: int = 2) -> str:
        interval = f"{self.confidence:.0%} interval {self.low:.{digits}f}-{self.high:.{digits}f}"
        if not self.measured:
            return f"no difference measured ({self.ratio:.{digits}f}x, {interval})"
        return f"{self.ratio:.{digits}f}x ({interval})"


def ratio_estimate(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.9, resamples: int = 4000,
                   seed: int = 0) -> RatioEstimate:
    """The ratio of medians a/b and its bootstrap interval (deterministic for a seed)."""
    if len(a) < 1 or len(b) < 1:
        raise ValueError("each phase needs at least one round")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not (np.isfinite(xa).all() and np.isfinite(xb).all()) or (xb <= 0).any():
        raise ValueError("rounds must be finite and the denominator's positive")
    rng = np.random.default_rng(seed)
    med_a = np.median(rng.choice(xa, size=(resamples, xa.size), replace=True), axis=1)
    med_b = np.median(rng.choice(xb, size=(resamples, xb.size), replace=True), axis=1)
    ratios = med_a / med_b
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return RatioEstimate(float(np.median(xa) / np.median(xb)), float(low), float(high), confidence)


def run_interleaved(phases: dict[str, Callable[[], float]], rounds: int = MIN_ROUNDS, *,
                    on_round: Callable[[str, int, float], None] | None = None) -> dict[str, PhaseRounds]:
    """Runs each phase once per round, in the same order every round (A B A B ...).

    A phase is a callable returning its figure for that round (for example
    audio seconds per second); engines and caches it uses stay warm between
    rounds because the callables own them. `on_round(name, round, value)` is
    told each figure as it comes.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    out = {name: PhaseRounds(name) for name in phases}
    for r in range(rounds):
        for name, run in phases.items():
            before = os.getloadavg()[0]
            value = float(run())
            out[name].values.append(value)
            out[name].load.append((before + os.getloadavg()[0]) / 2)
            if on_round is not None:
                on_round(name, r, value)
    return out


def ratio_summary(a: Sequence[float], b: Sequence[float], *, digits: int = 2) -> str:
    """`ratio_estimate(a, b).describe()`; with fewer than MIN_ROUNDS rounds a side, the ratio of medians
    and why it has no interval."""
    rounds = min(len(a), len(b))
    if rounds >= MIN_ROUNDS:
        return ratio_estimate(a, b).describe(digits)
    if rounds < 1:
        raise ValueError("each phase needs at least one round")
    ratio = statistics.median(a) / statistics.median(b)
    return f"{ratio:.{digits}f}x, no interval ({rounds} round(s); {MIN_ROUNDS} needed)"
