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

from omnicli.benchmark.continuity import continuity_figures
from omnicli.driver.records import RequestRecord

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)

# (metric stem, key suffix, scale from seconds); order is the report order.
DISTRIBUTIONS: tuple[tuple[str, str, float], ...] = (
    ("audio_ttfp", "_ms", 1000.0),
    ("e2el", "_ms", 1000.0),
    ("audio_rtf", "", 1.0),
    ("audio_duration", "_s", 1.0),
    ("audio_underrun", "_s", 1.0),
    # vLLM's token latencies, of the talker (stage 0): its first output, per output token, between outputs
    ("ttft", "_ms", 1000.0),
    ("tpot", "_ms", 1000.0),
    ("itl", "_ms", 1000.0),
)
# vLLM's `--goodput KEY:VALUE` keys: milliseconds, except the real-time factor (a ratio)
GOODPUT_METRICS = ("ttft", "tpot", "e2el", "audio_ttfp", "audio_rtf")


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
    for stem, values in metric_samples(records).items():
        out[f"num_{stem}_samples"] = len(values)
        suffix, scale = _UNITS[stem]
        for stat, value in distribution(values, percentiles, scale).items():
            out[f"{stat}_{stem}{suffix}"] = value
    out.update(continuity_figures(records))  # vLLM-Omni's and sglang-omni's streaming continuity
    return out


_UNITS = {stem: (suffix, scale) for stem, suffix, scale in DISTRIBUTIONS}


def metric_samples(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """The samples (seconds or ratios) each distribution is taken over.

    Audio metrics: successful requests with audio. Talker token latencies, as
    vLLM takes them: TTFT of each successful request that got a token, TPOT of
    those with two or more, every ITL of every successful request pooled.
    """
    ok = [r for r in records if r.ok]
    nonempty = [r for r in ok if r.num_samples > 0]
    return {
        # a successful request with audio has both (the filter only tells the type checker so)
        "audio_ttfp": [t for r in nonempty if (t := r.audio_ttfp) is not None],
        "e2el": [r.e2el for r in nonempty],
        "audio_rtf": [t for r in nonempty if (t := r.audio_rtf) is not None],
        "audio_duration": [r.audio_duration for r in nonempty],
        "audio_underrun": [r.audio_underrun for r in nonempty],
        "ttft": [r.ttft for r in ok if r.ttft is not None],
        "tpot": [r.tpot for r in ok if r.tpot is not None],
        "itl": [gap for r in ok for gap in r.itl],
    }


def parse_goodput(items: Iterable[str] | None) -> dict[str, float]:
    """vLLM's `--goodput KEY:VALUE ...` -> {key: threshold}; ms for times, a ratio for audio_rtf.
    Raises ValueError naming the bad item."""
    out: dict[str, float] = {}
    for item in items or ():
        key, sep, value = item.partition(":")
        key = key.strip()
        if not sep or key not in GOODPUT_METRICS:
            raise ValueError(f"{item!r} is not KEY:VALUE with KEY one of {', '.join(GOODPUT_METRICS)}")
        try:
            out[key] = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number") from None
        if not out[key] >= 0:
            raise ValueError(f"{item!r}: the value must be >= 0")
    return out


def _goodput_value(record: RequestRecord, key: str) -> float | None:
    value = {"ttft": record.ttft, "tpot": record.tpot, "e2el": record.e2el, "audio_ttfp": record.audio_ttfp,
             "audio_rtf": record.audio_rtf}[key]
    return None if value is None else value * _UNITS[key][1]


# vLLM-Omni's speech endpoint refuses a request that produced no audio (HTTP 400): in the vLLM-shaped
# file such a request is failed, with this error (omni's own file keeps it completed, in num_empty_audio).
EMPTY_AUDIO_ERROR = "did not produce audio output"


def good_requests(records: Sequence[RequestRecord], slos: dict[str, float]) -> int:
    """Successful requests with audio meeting every SLO (vLLM's goodput: value <= threshold). A
    request for which a metric is undefined (no token) does not meet that SLO; vLLM counts a
    TPOT of 0 for single-token requests, and so does this."""
    good = 0
    for r in records:
        if not r.nonempty:
            continue
        values = {k: (0.0 if k == "tpot" and r.tpot is None and r.ttft is not None else _goodput_value(r, k))
                  for k in slos}
        good += all(v is not None and v <= slos[k] for k, v in values.items())
    return good


def peak_figures(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`: over one-second buckets from
    the first successful submission, the most talker outputs in one second and the most
    successful requests active in one second (successful: with audio, as vLLM-Omni's endpoint)."""
    ok = [r for r in records if r.nonempty]
    if not ok:
        return 0.0, 0
    t0 = min(r.start for r in ok)
    buckets = int(np.ceil(max(r.end for r in ok) - t0)) + 1
    tokens = np.zeros(buckets)
    active = np.zeros(buckets)
    for r in ok:
        times = r.info.token_times if r.info is not None else []
        for t in times:
            b = int(t - t0)
            if 0 <= b < buckets:
                tokens[b] += 1
        active[int(r.start - t0):int(r.end - t0) + 1] += 1
    return float(tokens.max()), int(active.max())


def vllm_lists(rounds: Sequence[Sequence[RequestRecord]]) -> dict[str, list]:
    """vLLM's per-request lists, in submission order (rounds concatenated) and vLLM's units and
    defaults: seconds; a failed request (and one without audio, which vLLM-Omni fails) has ttft 0.0,
    no itls, latency 0.0 and output_len 0.
    `start_times` are seconds from the round's first submission (vLLM's are perf_counter values:
    only differences mean something). `latencies` and `queue_times` are kept without
    --save-detailed too, as vLLM keeps them."""
    keys = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times")
    out: dict[str, list] = {k: [] for k in keys}
    for rnd in rounds:
        t0 = min((r.start for r in rnd), default=0.0)
        for r in sorted(rnd, key=lambda r: r.start):
            ok = r.nonempty
            out["input_lens"].append(r.prompt_tokens)
            out["output_lens"].append(r.output_tokens if ok else 0)
            out["ttfts"].append(r.ttft if ok and r.ttft is not None else 0.0)
            out["itls"].append(r.itl if ok else [])
            out["latencies"].append(r.e2el if ok else 0.0)
            out["start_times"].append(r.start - t0)
            out["queue_times"].append(r.queue_time)
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


def vllm_figures(rounds: Sequence[Sequence[RequestRecord]], goodput: dict[str, float] | None = None) -> dict:
    """What `vllm bench serve` computes beyond the summary, over one run's measured rounds:
    `request_goodput` (requests meeting every `goodput` SLO per second), the peaks
    (`max_output_tokens_per_s`, `max_concurrent_requests`: the busiest second of any round),
    `total_audio_frames` (PCM frames of the completed requests, as vLLM-Omni counts them) and
    the per-request lists of `vllm_lists`; `completed` and `failed` as vLLM-Omni counts them (a request
    without audio failed) and the `errors` list with its message for those."""
    records = [r for rnd in rounds for r in rnd]
    duration = sum(round_duration(rnd) for rnd in rounds)
    peaks = [peak_figures(rnd) for rnd in rounds] or [(0.0, 0)]
    out: dict = {
        "request_goodput": good_requests(records, goodput) / duration if goodput and duration > 0 else 0.0,
        "max_output_tokens_per_s": max(p[0] for p in peaks),
        "max_concurrent_requests": max(p[1] for p in peaks),
        "total_audio_frames": sum(r.num_samples for r in records if r.ok),
        "completed": sum(1 for r in records if r.nonempty),
        "failed": sum(1 for r in records if not r.nonempty),
        "errors": [r.error or ("" if r.nonempty else EMPTY_AUDIO_ERROR)
                   for rnd in rounds for r in sorted(rnd, key=lambda r: r.start)],
    }
    out.update(vllm_lists(rounds))
    return out
