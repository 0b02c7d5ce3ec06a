"""Benchmark formulas of docs/metrics.md ("Benchmark"): pure functions on timings.

Everything here works on `perf_counter()` seconds and sample counts, so the
formulas can be checked by hand on synthetic timings. Names and units follow
vLLM / vLLM-Omni's `bench serve` (`mean_audio_ttfp_ms`, `p99_e2el_ms`,
`audio_throughput`, ...) so results compare one to one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from omnicli.driver.records import RequestRecord

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)

# (metric stem, key suffix, scale from seconds); order is the report order.
DISTRIBUTIONS: tuple[tuple[str, str, float], ...] = (
    ("audio_ttfp", "_ms", 1000.0),
    ("e2el", "_ms", 1000.0),
    ("audio_rtf", "", 1.0),
    ("audio_duration", "_s", 1.0),
    ("audio_underrun", "_s", 1.0),
)


# --- aggregates ---------------------------------------------------------------


def percentile_key(p: float) -> str:
    """`p99`, `p99.9`: vLLM's spelling of a percentile in result keys."""
    p = float(p)
    return f"p{int(p)}" if p.is_integer() else f"p{p}"


def parse_percentiles(text: str) -> list[float]:
    """`"50,90,99"` -> [50.0, 90.0, 99.0]; raises ValueError naming the bad item."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            p = float(item)
        except ValueError:
            raise ValueError(f"percentile {item!r} is not a number") from None
        if not 0 < p <= 100 or math.isnan(p):
            raise ValueError(f"percentile {item!r} must be in (0, 100]")
        out.append(p)
    if not out:
        raise ValueError("no percentiles given")
    return out


def distribution(values: Iterable[float], percentiles: Sequence[float], scale: float = 1.0) -> dict[str, float | None]:
    """mean, median, std (population, as vLLM) and percentiles (linear interpolation).

    Keys are `mean`, `median`, `std` and `p50`-style; all None for no values,
    so the result schema stays the same whatever happened.
    """
    arr = np.asarray(list(values), dtype=np.float64) * scale
    keys = ["mean", "median", "std"] + [percentile_key(p) for p in percentiles]
    if arr.size == 0:
        return dict.fromkeys(keys)
    out: dict[str, float | None] = {
        "mean": float(np.mean(arr)),
        "median": float(np.median(arr)),
        "std": float(np.std(arr)),
    }
    for p in percentiles:
        out[percentile_key(p)] = float(np.percentile(arr, p))
    return out


def round_duration(records: Sequence[RequestRecord]) -> float:
    """Wall seconds from the first submission to the last completion."""
    if not records:
        return 0.0
    return max(r.end for r in records) - min(r.start for r in records)


def summarize(rounds: Sequence[Sequence[RequestRecord]], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> dict:
    """Run totals and distributions over one or more measured rounds.

    Rounds are pooled: throughputs are total work / total duration (not a
    mean of per-round ratios); distributions are over every request of every
    round. Latency statistics use successful requests with audio only.
    """
    records = [r for rnd in rounds for r in rnd]
    durations = [round_duration(rnd) for rnd in rounds]
    total_duration = float(sum(durations))
    ok = [r for r in records if r.ok]
    nonempty = [r for r in ok if r.num_samples > 0]
    total_audio = float(sum(r.audio_duration for r in ok))
    out: dict = {
        "duration": total_duration,
        "round_durations": durations,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "num_nonempty_audio": len(nonempty),
        "num_empty_audio": len(ok) - len(nonempty),
        "num_hit_cap": sum(1 for r in ok if r.finish_reason == "length"),
        "num_ref_hot": sum(1 for r in records if r.ref_cache == "hot"),
        "num_ref_cold": sum(1 for r in records if r.ref_cache == "cold"),
        "total_audio_duration_s": total_audio,
        "total_input_tokens": sum(r.prompt_tokens for r in ok),
        "total_output_tokens": sum(r.output_tokens for r in ok),
        "request_throughput": len(ok) / total_duration if total_duration > 0 else 0.0,
        "audio_throughput": total_audio / total_duration if total_duration > 0 else 0.0,
    }
    per_metric = {
        "audio_ttfp": [r.audio_ttfp for r in nonempty],
        "e2el": [r.e2el for r in nonempty],
        "audio_rtf": [r.audio_rtf for r in nonempty],
        "audio_duration": [r.audio_duration for r in nonempty],
        "audio_underrun": [r.audio_underrun for r in nonempty],
    }
    for stem, suffix, scale in DISTRIBUTIONS:
        stats = distribution(per_metric[stem], percentiles, scale)
        for stat, value in stats.items():
            out[f"{stat}_{stem}{suffix}"] = value
    return out


def detailed_lists(rounds: Sequence[Sequence[RequestRecord]]) -> dict[str, list]:
    """Per-request lists of `--save-detailed`, in submission order, rounds concatenated.

    Times are seconds; `start_times` are relative to the round's first
    submission. Values that do not exist (no audio, failed) are None.
    """
    out: dict[str, list] = {
        k: []
        for k in ("utts", "request_rounds", "start_times", "audio_ttfps", "e2els", "audio_durations",
                  "audio_rtfs", "audio_underruns", "ref_caches", "finish_reasons", "errors")
    }
    for index, rnd in enumerate(rounds):
        t0 = min((r.start for r in rnd), default=0.0)
        for r in sorted(rnd, key=lambda r: r.start):
            out["utts"].append(r.utt)
            out["request_rounds"].append(index)  # not "rounds": the run's round count has that key
            out["start_times"].append(r.start - t0)
            out["audio_ttfps"].append(r.audio_ttfp if r.ok else None)
            out["e2els"].append(r.e2el if r.ok else None)
            out["audio_durations"].append(r.audio_duration)
            out["audio_rtfs"].append(r.audio_rtf if r.ok else None)
            out["audio_underruns"].append(r.audio_underrun if r.nonempty else None)
            out["ref_caches"].append(r.ref_cache)
            out["finish_reasons"].append(r.finish_reason)
            out["errors"].append(r.error or "")
    return out
