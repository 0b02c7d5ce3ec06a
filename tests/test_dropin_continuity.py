"""Issue 32 item 3 (and item 8 for underrun and continuity): streaming continuity as vLLM-Omni and
sglang-omni report it (omnicli/benchmark/continuity.py), checked against vLLM-Omni's own
`audio_continuity.compute_continuity_stats` on the same timelines where vLLM-Omni is installed."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from omnicli.benchmark.continuity import THRESHOLD_ENV, continuity_figures, inter_chunk_gaps, threshold_s
from omnicli.driver.records import RequestRecord

SR = 24_000


def record(times: list[float], samples: list[int], error: str | None = None) -> RequestRecord:
    return RequestRecord(utt="u", request_id="r", start=0.0, end=times[-1] if times else 0.0, sample_rate=SR,
                         chunk_times=list(times), chunk_samples=list(samples), error=error)


def vllm_omni_continuity():
    """vLLM-Omni's `audio_continuity` module, loaded from the installed wheel's file (it needs nothing
    else; its package __init__ would import the whole serving stack)."""
    try:
        dist = importlib.metadata.distribution("vllm-omni")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("vLLM-Omni is not installed: no reference to compare with")
    path = Path(str(dist.locate_file("vllm_omni/benchmarks/audio_continuity.py")))
    spec = importlib.util.spec_from_file_location("vllm_omni_audio_continuity", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while being defined
    spec.loader.exec_module(module)
    return module


def timelines(seed: int = 0, n: int = 300) -> list[tuple[list[float], list[int]]]:
    """Hand cases (steady, one gap, two gaps, a late burst, a single chunk) and random ones."""
    out = [
        ([0.5, 1.0, 1.5], [SR // 2] * 3),  # exactly real time: no underrun
        ([0.2, 0.9, 1.3], [SR // 2, SR // 2, SR // 4]),  # one 0.2 s gap
        ([0.2, 0.9, 2.0, 2.1], [SR // 2, SR // 2, SR, SR]),  # two gaps: the stalls add up
        ([0.1, 3.0, 3.01, 3.02], [SR // 10, SR, SR, SR]),  # a long wait, then a burst
        ([0.4], [SR]),
    ]
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(1, 12))
        times = np.cumsum(rng.exponential(0.12, k)).tolist()
        samples = rng.integers(SR // 50, SR // 4, k).tolist()
        out.append((times, samples))
    return out


def test_worst_underrun_and_ok_flag_match_vllm_omnis_on_the_same_timelines():
    reference = vllm_omni_continuity()
    for times, samples in timelines():
        ours = record(times, samples)
        for threshold in (0.0, 0.05, 0.1, 0.2):
            theirs = reference.compute_continuity_stats(
                chunk_arrival_times_s=times, chunk_bytes=[2 * n for n in samples], sample_rate=SR, sample_width=2,
                channels=1, threshold_s=threshold)
            assert ours.audio_underrun == pytest.approx(theirs.max_underrun_s, abs=1e-9), (times, samples)
            ok = continuity_figures([ours], threshold)["audio_continuity_ok_rate"] == 1.0
            assert ok == theirs.is_continuous or abs(theirs.max_underrun_s - threshold) < 1e-9


def test_ok_rate_and_sglang_levels_over_requests_with_audio():
    steady = record([0.5, 1.0, 1.5], [SR // 2] * 3)  # worst underrun 0
    gap_75ms = record([0.5, 1.075], [SR // 2, SR // 2])  # 0.075 s
    gap_150ms = record([0.5, 1.15], [SR // 2, SR // 2])  # 0.15 s
    gap_300ms = record([0.5, 1.3], [SR // 2, SR // 2])  # 0.3 s
    failed = record([0.5], [SR // 2], error="boom")  # not a success: not counted
    silent = record([0.5], [0])  # no audio: nothing to play, not counted
    figures = continuity_figures([steady, gap_75ms, gap_150ms, gap_300ms, failed, silent], 0.1)
    assert figures["audio_continuity_threshold_s"] == 0.1
    assert figures["audio_continuity_ok_rate"] == pytest.approx(2 / 4)
    assert (figures["audio_continuity_c50_rate"], figures["audio_continuity_c100_rate"],
            figures["audio_continuity_c200_rate"]) == pytest.approx((1 / 4, 2 / 4, 3 / 4))
    gaps_ms = [500, 500, 575, 650, 800]
    assert figures["p95_inter_chunk_gap_ms"] == pytest.approx(float(np.percentile(gaps_ms, 95)))
    empty = continuity_figures([failed, silent], 0.1)
    assert empty["audio_continuity_ok_rate"] == 1.0 and empty["p95_inter_chunk_gap_ms"] is None  # vLLM-Omni: 1.0


def test_gaps_skip_chunks_without_audio():
    assert inter_chunk_gaps(record([0.1, 0.2, 0.4], [10, 0, 10])) == pytest.approx([0.3])


def test_the_threshold_comes_from_vllm_omnis_environment_variable(monkeypatch):
    warnings: list[str] = []
    assert threshold_s({}) == 0.1
    assert threshold_s({THRESHOLD_ENV: "0.25"}) == 0.25
    assert threshold_s({THRESHOLD_ENV: "-1"}) == 0.0  # as vLLM-Omni: negative is 0
    assert threshold_s({THRESHOLD_ENV: "soon"}, warn=warnings.append) == 0.1 and THRESHOLD_ENV in warnings[0]
    monkeypatch.setenv(THRESHOLD_ENV, "0.2")
    gap_150ms = record([0.5, 1.15], [SR // 2, SR // 2])
    assert continuity_figures([gap_150ms])["audio_continuity_ok_rate"] == 1.0  # read when the run is summed up
    monkeypatch.delenv(THRESHOLD_ENV)
    assert continuity_figures([gap_150ms])["audio_continuity_ok_rate"] == 0.0
