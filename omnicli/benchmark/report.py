"""Benchmark results built from the measured passes: `BenchRun`s, their A/B ratios, the `BenchDocument`.

A result file holds every pass of one invocation:
`{"schema_version", "omni_version", "started_at", "runs": [...], "comparisons": [...]}`; each run
holds the keys of docs/metrics.md, named as vLLM-Omni's `bench serve` names them, so
`runs[i]["mean_audio_ttfp_ms"]` in the file (`run.mean_audio_ttfp_ms` here) reads the same number
both tools report. How they are shown and written: `omnicli.benchmark.outputs`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from omnicli import __version__
from omnicli.benchmark.metrics import DEFAULT_PERCENTILES, DISTRIBUTIONS, detailed_lists, percentile_key, summarize
from omnicli.benchmark.result_models import BenchComparison, BenchDocument, BenchRoundFigures, BenchRun
from omnicli.benchmark.session import PassResult
from omnicli.runtime.machine import machine_facts

# Metrics an A/B comparison reports as ratios b/a (plus every distribution key).
RATIO_KEYS = ("request_throughput", "audio_throughput", "talker_tokens_per_s", "mean_codec_batch_size")
# With --interleave: the figures kept per round, and compared over rounds with an interval (b/a).
ROUND_KEYS = ("audio_throughput", "request_throughput", "mean_audio_ttfp_ms", "p99_audio_ttfp_ms", "mean_e2el_ms",
              "mean_audio_rtf")


def distribution_keys(percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[str]:
    keys = []
    for stem, suffix, _ in DISTRIBUTIONS:
        for stat in ["mean", "median", "std"] + [percentile_key(p) for p in percentiles]:
            keys.append(f"{stat}_{stem}{suffix}")
    return keys


def _json_rate(rate: float) -> float | str:
    return rate if math.isfinite(rate) else "inf"  # strict JSON has no Infinity (vLLM writes "inf")


def _ring_headroom(profile: Any, model: str | None) -> bool | None:
    """The profile's ring sizing; None for a family without ring caches (windowed codecs)."""
    from omnicli.families import UnknownFamily, get_family

    try:
        if model is None or not get_family(model).ring_cache:
            return None
    except UnknownFamily:
        return None
    try:
        return bool(profile.profile.codec.codec_ring_headroom)
    except AttributeError:
        return None


def _stage_figures(result: PassResult, audio_seconds: float) -> dict:
    """The pass's per-stage figures from engines that report stages (vLLM-Omni); nothing for the others."""
    from omnicli.benchmark.stage_metrics import summarize as summarize_stages

    infos = [r.info for rnd in result.record_rounds for r in rnd if r.info is not None and r.info.stages]
    return summarize_stages(infos, result.stats.stages, audio_seconds) if infos else {}


def build_run(
    result: PassResult,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    detailed: bool = False,
    machine: dict | None = None,
    extra: dict | None = None,
) -> BenchRun:
    """The result of one pass (docs/metrics.md keys); ValidationError if a figure broke its model."""
    return BenchRun.model_validate(run_fields(result, percentiles=percentiles, detailed=detailed, machine=machine,
                                              extra=extra))


def as_run(run: BenchRun | Mapping[str, Any]) -> BenchRun:
    """A run as the object, from the object or from its file dict (`engines.build_engines_run` builds dicts)."""
    return run if isinstance(run, BenchRun) else BenchRun.model_validate(run)


def run_fields(
    result: PassResult,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    detailed: bool = False,
    machine: dict | None = None,
    extra: dict | None = None,
) -> dict[str, Any]:
    """`build_run`'s keys and values as a dict, in the file's order (to merge several engines' passes)."""
    resolved = result.profile.profile
    stats = result.stats.to_dict()
    run: dict[str, Any] = {
        "omni_version": __version__,
        "started_at": result.started_at,
        "label": result.label,
        "profile_label": result.profile.label,
        "profile_name": resolved.name,
        "profile": resolved.to_dict(),
        "profile_digest": resolved.digest,
        "model": result.model,
        "device": result.device,
        "sample_rate": result.sample_rate,
        "machine": machine if machine is not None else machine_facts(result.device),
        "max_concurrency": result.shape.concurrency,
        "request_rate": _json_rate(result.shape.request_rate),
        "burstiness": result.shape.burstiness,
        "seed": result.shape.seed,
        "num_prompts": result.num_prompts,
        "rounds": len(result.rounds),
        "warmup_requests": result.warmup_requests,
        "warmup_failed": result.warmup_failed,
    }
    if result.shape.ramp_up is not None:  # vLLM's keys for a ramped arrival rate
        run.update(ramp_up_strategy=result.shape.ramp_up, ramp_up_start_rps=result.shape.ramp_start,
                   ramp_up_end_rps=result.shape.ramp_end)
    run.update(summarize(result.record_rounds, percentiles))
    run.update(_stage_figures(result, run.get("total_audio_duration_s") or 0.0))
    run.update(
        {
            "talker_tokens": stats["talker_tokens"],
            "talker_tokens_per_s": stats["talker_tokens_per_s"],
            "codec_steps": stats["codec_steps"],
            "codec_frames": stats["codec_frames"],
            "mean_codec_batch_size": stats["mean_codec_batch_size"],
            "coalescing_waits": stats["coalescing_waits"],
            "coalescing_wait_ms": stats["coalescing_wait_ms"],
            "codec_ring_headroom": _ring_headroom(resolved, result.model),
            "engine_stats": stats,
            "failures": [
                {"utt": r.utt, "request_id": r.request_id, "round": i, "error": r.error}
                for i, rnd in enumerate(result.record_rounds)
                for r in rnd
                if not r.ok
            ],
        }
    )
    if result.interleaved:
        run.update(interleaved=True, engine_restarts=result.engine_restarts, per_round=round_figures(result))
    if extra:
        run.update(extra)
    if detailed:
        run.update(detailed_lists(result.record_rounds))
    return run


def round_figures(result: PassResult) -> list[dict]:
    """Each round's own ROUND_KEYS figures and the load average around it (BenchRoundFigures)."""
    out = []
    for i, rnd in enumerate(result.rounds):
        figures = summarize([rnd.records], (99,))
        out.append({"round": i, "load_avg": rnd.load, **{k: figures.get(k) for k in ROUND_KEYS}})
    return out


def round_ratios(base: Sequence[BenchRoundFigures], other: Sequence[BenchRoundFigures]) -> list[dict]:
    """Per ROUND_KEYS metric: each side's median and spread over its rounds (a run's `per_round`), and
    median(b)/median(a) with compare.ratio_estimate's bootstrap interval (none with fewer than
    compare.MIN_ROUNDS rounds a side)."""
    from omnicli.benchmark.compare import MIN_ROUNDS, ratio_estimate, ratio_summary

    out = []
    for key in ROUND_KEYS:
        a = [value for f in base if _finite(value := getattr(f, key))]
        b = [value for f in other if _finite(value := getattr(f, key))]
        entry: dict[str, Any] = {"metric": key, "a_rounds": len(a), "b_rounds": len(b)}
        for side, values in (("a", a), ("b", b)):
            entry.update({f"{side}_median": float(np.median(values)) if values else None,
                          f"{side}_min": min(values) if values else None,
                          f"{side}_max": max(values) if values else None})
        entry.update(ratio=ratio(entry["b_median"], entry["a_median"]), low=None, high=None, confidence=None,
                     measured=None)
        if entry["ratio"] is None or min(a) <= 0:
            entry["summary"] = "no ratio (no figure, or a zero one)"
        elif min(len(a), len(b)) < MIN_ROUNDS:
            entry["summary"] = ratio_summary(b, a)
        else:
            estimate = ratio_estimate(b, a)
            entry.update(low=estimate.low, high=estimate.high, confidence=estimate.confidence,
                         measured=estimate.measured, summary=estimate.describe())
        out.append(entry)
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def ratio(b: Any, a: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
        return None
    if a == 0 or not math.isfinite(a) or not math.isfinite(b):
        return None
    return b / a


def group_by_shape(runs: Sequence[BenchRun]) -> list[list[BenchRun]]:
    """Runs sharing a load shape (one per profile), in first-seen order."""
    groups: dict[tuple, list[BenchRun]] = {}
    for run in runs:
        groups.setdefault((run.max_concurrency, run.request_rate, run.burstiness), []).append(run)
    return list(groups.values())


def compare_runs(runs: Sequence[BenchRun], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[dict]:
    """For each load shape, every other profile's metrics divided by the first profile's (b/a)."""
    keys = list(RATIO_KEYS) + distribution_keys(percentiles)
    out: list[dict[str, Any]] = []
    for group in group_by_shape(runs):
        base = group[0]
        for other in group[1:]:
            out.append(
                {
                    "max_concurrency": base.max_concurrency,
                    "request_rate": base.request_rate,
                    "a": base.profile_label,
                    "b": other.profile_label,
                    "ratios": {k: ratio(other.figure(k), base.figure(k)) for k in keys},
                }
            )
            if base.interleaved and other.interleaved:
                out[-1]["interleaved"] = round_ratios(base.per_round or [], other.per_round or [])
    return out


def build_document(
    runs: Sequence[BenchRun | Mapping[str, Any]],
    started_at: str,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    *,
    interrupted: bool = False,
    engine_error: str | None = None,
    unfinished: str | None = None,
    ray: dict | None = None,
) -> BenchDocument:
    """The result file. `runs` are the completed passes (objects, or their dicts); when the invocation was
    interrupted or the engine failed, `unfinished` names the pass it dropped.
    `ray`: where the engines of `omni bench --ray` ran (`BenchRayFacts`)."""
    objects = [as_run(r) for r in runs]
    several = len({r.profile_label for r in objects}) > 1
    fields: dict[str, Any] = {
        "schema_version": 1,
        "omni_version": __version__,
        "started_at": started_at,
        "interrupted": interrupted,
        "engine_error": engine_error,
        "unfinished": unfinished,
        "runs": objects,
        "comparisons": [BenchComparison.model_validate(c) for c in compare_runs(objects, percentiles)]
        if several else [],
    }
    if ray is not None:
        fields["ray"] = ray
    return BenchDocument.model_validate(fields)
