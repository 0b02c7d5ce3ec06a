"""Streaming continuity of a run's audio, as vLLM-Omni and sglang-omni report it (docs/bench.md).

A listener starts playing at the first chunk with audio and plays in real time. A request's worst
underrun is the longest the player was starved: with a player that waits for late audio, the total
of its stalls (`RequestRecord.audio_underrun`, docs/metrics.md). That is the same number as
vLLM-Omni's `compute_continuity_stats(...).max_underrun_s` (its player's clock never waits, and it
takes the worst deficit): the stall total after chunk i is the largest deficit up to chunk i, so the
two agree on every timeline (tests/test_dropin_continuity.py compares them on the same timelines).

- vLLM-Omni: a request is continuous when its worst underrun is at most the threshold
  (`VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S`, 0.1 s by default; a bad value is the default, a
  negative one 0); `audio_continuity_ok_rate` is the share of successful requests with audio that are,
  1.0 when there are none (vLLM-Omni's default).
- sglang-omni's C50 / C100 / C200: the same share at 50, 100 and 200 ms (`audio_continuity_c50_rate`,
  ...), and the 95th percentile of the gaps between consecutive audio chunks, pooled over the
  requests (`p95_inter_chunk_gap_ms`; null without two chunks).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from omnicli.driver.records import RequestRecord

THRESHOLD_ENV = "VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S"  # vLLM-Omni's name, honoured as it reads it
DEFAULT_THRESHOLD_S = 0.1
SGLANG_LEVELS_MS = (50, 100, 200)
KEYS = ("audio_continuity_threshold_s", "audio_continuity_ok_rate",
        *(f"audio_continuity_c{ms}_rate" for ms in SGLANG_LEVELS_MS), "p95_inter_chunk_gap_ms")


def threshold_s(environ: Mapping[str, str] | None = None, warn: Callable[[str], None] | None = None) -> float:
    """vLLM-Omni's continuity threshold from its environment variable (seconds)."""
    raw = (os.environ if environ is None else environ).get(THRESHOLD_ENV)
    if not raw:
        return DEFAULT_THRESHOLD_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        if warn is not None:
            warn(f"${THRESHOLD_ENV}={raw!r} is not a number of seconds: using {DEFAULT_THRESHOLD_S}")
        return DEFAULT_THRESHOLD_S
    return max(value, 0.0)


def inter_chunk_gaps(record: RequestRecord) -> list[float]:
    """Seconds between consecutive chunks that hold audio."""
    times = [t for t, n in zip(record.chunk_times, record.chunk_samples) if n > 0]
    return [b - a for a, b in zip(times, times[1:])]


def _rate(underruns: Sequence[float], limit_s: float) -> float:
    return sum(1 for u in underruns if u <= limit_s) / len(underruns) if underruns else 1.0


def continuity_figures(records: Sequence[RequestRecord], threshold: float | None = None) -> dict[str, float | None]:
    """The KEYS of a run's records (successful requests with audio; the others have nothing to play)."""
    threshold = threshold_s() if threshold is None else threshold
    played = [r for r in records if r.nonempty]
    underruns = [r.audio_underrun for r in played]
    gaps = [g for r in played for g in inter_chunk_gaps(r)]
    out: dict[str, float | None] = {
        "audio_continuity_threshold_s": threshold,
        "audio_continuity_ok_rate": _rate(underruns, threshold),
    }
    for ms in SGLANG_LEVELS_MS:
        out[f"audio_continuity_c{ms}_rate"] = _rate(underruns, ms / 1000.0)
    out["p95_inter_chunk_gap_ms"] = float(np.percentile(np.asarray(gaps) * 1000.0, 95)) if gaps else None
    return out
