"""A/B of bench runs: each metric of profile B against profile A under one load shape, as the
ratio B/A with an interval over the rounds, and whether it is within the noise.

Per-round figures come from the `--save-detailed` lists (`request_rounds`,
`round_durations` and the per-request values). The ratio and its interval are
the project's (omnicli.benchmark.compare.ratio_estimate: ratio of the round
medians, bootstrap interval); an interval that contains 1.0 is within the
noise. With one round (or no detailed lists) there is no interval, and the page
says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from omnicli.benchmark.compare import MIN_ROUNDS, ratio_estimate

CONFIDENCE = 0.9


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    higher_is_better: bool
    per_round: Callable[[list[dict[str, Any]], float], float | None]  # (requests of one round, its duration) -> value


Requests = list[dict[str, Any]]  # the request rows of one round of a bench run
RoundValue = Callable[[Requests, float], "float | None"]


def _ok(reqs: Requests) -> Requests:
    return [r for r in reqs if not r.get("error") and (r.get("audio_duration") or 0) > 0]


def _mean_of(name: str, scale: float = 1.0) -> RoundValue:
    def value(reqs: Requests, _duration: float) -> float | None:
        vals = [r[name] for r in _ok(reqs) if isinstance(r.get(name), (int, float))]
        return float(np.mean(vals)) * scale if vals else None
    return value


def _pct_of(name: str, q: float, scale: float = 1.0) -> RoundValue:
    def value(reqs: Requests, _duration: float) -> float | None:
        vals = [r[name] for r in _ok(reqs) if isinstance(r.get(name), (int, float))]
        return float(np.percentile(vals, q)) * scale if vals else None
    return value


def _audio_throughput(reqs: Requests, duration: float) -> float | None:
    return sum(r.get("audio_duration") or 0 for r in reqs if not r.get("error")) / duration if duration > 0 else None


def _request_throughput(reqs: Requests, duration: float) -> float | None:
    return sum(1 for r in reqs if not r.get("error")) / duration if duration > 0 else None


METRICS = (
    Metric("audio_throughput", "audio-s/s", True, _audio_throughput),
    Metric("request_throughput", "requests/s", True, _request_throughput),
    Metric("mean_audio_ttfp_ms", "mean first audio (ms)", False, _mean_of("audio_ttfp", 1000)),
    Metric("p50_audio_ttfp_ms", "p50 first audio (ms)", False, _pct_of("audio_ttfp", 50, 1000)),
    Metric("p99_audio_ttfp_ms", "p99 first audio (ms)", False, _pct_of("audio_ttfp", 99, 1000)),
    Metric("mean_e2el_ms", "mean end-to-end (ms)", False, _mean_of("e2el", 1000)),
    Metric("mean_audio_rtf", "mean RTF", False, _mean_of("audio_rtf")),
    Metric("mean_audio_underrun_s", "mean underrun (s)", False, _mean_of("audio_underrun")),
    Metric("mean_ttft_ms", "mean first token (ms)", False, _mean_of("ttft", 1000)),
)

# The --save-detailed lists, by the name a request's value takes here (vLLM's `ttfts` when present).
DETAILED = {
    "utt": "utts",
    "round": "request_rounds",
    "start": "start_times",
    "audio_ttfp": "audio_ttfps",
    "e2el": "e2els",
    "audio_duration": "audio_durations",
    "audio_rtf": "audio_rtfs",
    "audio_underrun": "audio_underruns",
    "error": "errors",
    "ttft": "ttfts",
    "finish_reason": "finish_reasons",
}


def requests_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's requests from its detailed lists (empty without --save-detailed); absent lists give absent keys."""
    lists = {name: run[key] for name, key in DETAILED.items() if isinstance(run.get(key), list)}
    n = max((len(v) for v in lists.values()), default=0)
    if "start" not in lists or n == 0:
        return []
    return [{name: (values[i] if i < len(values) else None) for name, values in lists.items()} for i in range(n)]


def round_values(run: dict[str, Any], metric: Metric) -> list[float]:
    reqs = requests_of(run)
    durations = run.get("round_durations") or []
    if not reqs or not durations:
        return []
    out = []
    for r, duration in enumerate(durations):
        mine = [q for q in reqs if (q.get("round") or 0) == r]
        value = metric.per_round(mine, float(duration or 0))
        if value is not None and math.isfinite(value):
            out.append(value)
    return out


@dataclass
class Difference:
    metric: str
    label: str
    a_value: float | None  # the median of A's rounds (the pooled figure without rounds)
    b_value: float | None
    ratio: float | None  # B / A
    low: float | None  # the interval of the ratio
    high: float | None
    rounds: tuple[int, int]
    verdict: str  # "within noise", "better" or "worse" (B against A), or why there is no interval

    @property
    def rel(self) -> float | None:
        """B against A in percent (+10: B is 10 % higher)."""
        return (self.ratio - 1) * 100 if self.ratio is not None else None


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """Every metric both runs have per-round values for (or, failing that, pooled values)."""
    out = []
    for metric in METRICS:
        ra, rb = round_values(a, metric), round_values(b, metric)
        if not (ra and rb):
            ra, rb = (
                [v for v in (_num(a.get(metric.key)),) if v is not None],
                [v for v in (_num(b.get(metric.key)),) if v is not None],
            )
        if not (ra and rb):
            continue
        a_value, b_value = float(np.median(ra)), float(np.median(rb))
        ratio = b_value / a_value if a_value > 0 else None
        if ratio is None:
            out.append(
                Difference(
                    metric.key, metric.label, a_value, b_value, None, None, None, (len(ra), len(rb)), "no ratio: A is 0"
                )
            )
            continue
        if min(len(ra), len(rb)) < MIN_ROUNDS:  # fewer give no usable interval (benchmark.compare)
            why = f"no interval: needs --save-detailed and --rounds {MIN_ROUNDS} or more"
            out.append(
                Difference(metric.key, metric.label, a_value, b_value, ratio, None, None, (len(ra), len(rb)), why)
            )
            continue
        try:
            est = ratio_estimate(rb, ra, confidence=CONFIDENCE)
        except ValueError as exc:  # a round of A at 0 (no underrun at all in it, say)
            out.append(
                Difference(
                    metric.key,
                    metric.label,
                    a_value,
                    b_value,
                    ratio,
                    None,
                    None,
                    (len(ra), len(rb)),
                    f"no interval: {exc}",
                )
            )
            continue
        if not est.measured:
            verdict = "within noise"
        else:
            verdict = "better" if (est.ratio > 1) == metric.higher_is_better else "worse"
        out.append(
            Difference(
                metric.key, metric.label, a_value, b_value, est.ratio, est.low, est.high, (len(ra), len(rb)), verdict
            )
        )
    return out


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def pairs(runs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(A, B) for each load shape run by two or more profiles: the first profile against each other one."""
    shapes: dict[tuple[object, str], list[dict[str, Any]]] = {}
    for run in runs:
        shapes.setdefault((run.get("max_concurrency"), str(run.get("request_rate"))), []).append(run)
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for group in shapes.values():
        profiles: list[dict[str, Any]] = []
        for run in group:
            if run.get("arm") not in [p.get("arm") for p in profiles]:
                profiles.append(run)
        out.extend((profiles[0], other) for other in profiles[1:])
    return out
