"""Interleaved rounds and the bootstrap ratio interval (omnicli.benchmark.compare)."""

from __future__ import annotations

import math

import pytest

from omnicli.benchmark.compare import PhaseRounds, ratio_estimate, run_interleaved


def test_clearly_faster_phase_is_a_measured_ratio():
    est = ratio_estimate([20.0, 21.0, 19.5, 20.5], [10.0, 10.4, 9.8, 10.1])
    assert est.measured
    assert est.ratio == pytest.approx(20.25 / 10.05)
    assert est.low <= est.ratio <= est.high
    assert 1.8 < est.low and est.high < 2.2
    assert est.describe().startswith("2.01x (90% interval")


def test_overlapping_phases_say_no_difference():
    est = ratio_estimate([10.0, 12.0, 9.0, 11.5], [10.5, 9.5, 11.8, 10.2])
    assert not est.measured
    assert est.low < 1.0 < est.high
    assert est.describe().startswith("no difference measured (")


def test_interval_is_deterministic_for_a_seed_and_narrows_with_confidence():
    a, b = [5.0, 6.0, 5.5, 7.0, 5.2], [4.0, 4.4, 5.1, 4.2, 4.8]
    assert ratio_estimate(a, b, seed=3) == ratio_estimate(a, b, seed=3)
    wide, narrow = ratio_estimate(a, b, confidence=0.98), ratio_estimate(a, b, confidence=0.5)
    assert wide.low <= narrow.low and narrow.high <= wide.high


@pytest.mark.parametrize("a, b", [([], [1.0]), ([1.0], [0.0]), ([math.nan], [1.0]), ([1.0], [math.inf])])
def test_unusable_rounds_are_refused(a, b):
    with pytest.raises(ValueError):
        ratio_estimate(a, b)


def test_phases_alternate_and_record_load():
    calls = []
    seen = []

    def phase(name, value):
        def run():
            calls.append(name)
            return value
        return run

    rounds = run_interleaved({"a": phase("a", 2.0), "b": phase("b", 1.0)}, rounds=3,
                             on_round=lambda name, r, v: seen.append((name, r, v)))
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert seen[:2] == [("a", 0, 2.0), ("b", 0, 1.0)]
    assert rounds["a"].values == [2.0] * 3 and len(rounds["b"].load) == 3
    assert all(x >= 0 for x in rounds["a"].load)


def test_phase_summary_text():
    p = PhaseRounds("engine", [3.0, 1.0, 2.0], [0.5, 1.5, 1.0])
    assert p.median == 2.0 and p.spread == (1.0, 3.0) and p.mean_load == 1.0
    assert p.describe(" audio-s/s", 1) == "engine: median 2.0 audio-s/s (min 1.0, max 3.0, 3 rounds, load 1.0)"
