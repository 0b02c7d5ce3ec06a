"""`--plot FILE.png`: benchmark plots (matplotlib's Agg backend: no display needed; the `plot` extra).

A concurrency sweep plots audio throughput and first-audio latency against concurrency, one line per
profile; a single load shape plots the latency distributions (first audio and end-to-end), one
histogram per profile, from the per-request lists (the passes' records, or a file's --save-detailed
lists).
"""

from __future__ import annotations

import importlib.util
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.atomic import write_bytes_atomic
from omnicli.benchmark.result_models import BenchDocument, BenchRun
from omnicli.errors import UsageError
from omnicli.runtime.console import err_console

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult

PLOT_INSTALL = 'pip install "omnicli[plot]" (or: pip install matplotlib)'


def plot_missing() -> str | None:
    """Why --plot cannot draw here (checked before any engine starts), or None."""
    if importlib.util.find_spec("matplotlib") is None:
        return f"--plot draws with matplotlib, which is not installed: {PLOT_INSTALL}"
    return None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def is_sweep(runs: Sequence[BenchRun]) -> bool:
    values = {r.max_concurrency for r in runs}
    return len(values) > 1 and None not in values


def _by_profile(runs: Sequence[BenchRun]) -> dict[str, list[BenchRun]]:
    out: dict[str, list[BenchRun]] = {}
    for run in runs:
        out.setdefault(run.profile_label, []).append(run)
    return out


def _nan(values: Sequence[float | None]) -> list[float]:
    return [v if v is not None else float("nan") for v in values]


def _sweep(runs: Sequence[BenchRun]) -> Any:
    plt = _pyplot()
    fig, (ax_tp, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, own in _by_profile(runs).items():
        pts = sorted(own, key=lambda r: r.max_concurrency or 0)
        xs = [r.max_concurrency for r in pts]
        ax_tp.plot(xs, [r.audio_throughput for r in pts], marker="o", label=label)
        ax_lat.plot(xs, _nan([r.mean_audio_ttfp_ms for r in pts]), marker="o", label=f"{label} mean")
        p99 = [r.percentile(99, "audio_ttfp") for r in pts]
        if any(v is not None for v in p99):
            ax_lat.plot(xs, _nan(p99), marker="x", linestyle="--", label=f"{label} p99")
    levels = sorted({r.max_concurrency or 0 for r in runs})
    for ax in (ax_tp, ax_lat):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])  # the measured levels, not powers of 2
        ax.minorticks_off()
        ax.set_xlabel("concurrency")
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax_tp.set_ylabel("audio throughput (audio s / s)")
    ax_tp.set_title("Audio throughput")
    ax_lat.set_ylabel("first-audio latency (ms)")
    ax_lat.set_title("Time to first audio packet")
    return fig


def _distribution(runs: Sequence[BenchRun], details: Sequence[dict]) -> Any:
    plt = _pyplot()
    fig, (ax_ttfp, ax_e2el) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run, detail in zip(runs, details):
        label = run.profile_label
        ttfp = [v * 1000 for v in detail["audio_ttfps"] if v is not None]
        e2el = [v * 1000 for v, d in zip(detail["e2els"], detail["audio_durations"]) if v is not None and d > 0]
        if ttfp:
            ax_ttfp.hist(ttfp, bins=30, alpha=0.6, label=label)
        if e2el:
            ax_e2el.hist(e2el, bins=30, alpha=0.6, label=label)
    ax_ttfp.set_xlabel("first-audio latency (ms)")
    ax_e2el.set_xlabel("end-to-end latency (ms)")
    for ax in (ax_ttfp, ax_e2el):
        ax.set_ylabel("requests")
        ax.grid(True, alpha=0.3)
        ax.legend()
    title = runs[0].label.split("/", 1)[-1] if runs else ""
    fig.suptitle(f"Latency distribution ({title})")
    return fig


def plot_results(runs: Sequence[BenchRun], details: Sequence[dict], path: str | os.PathLike) -> Path:
    """Writes the plot for these runs; `details[i]` are run i's per-request lists (`metrics.detailed_lists`
    keys; only a single load shape's histograms read them)."""
    fig = _sweep(runs) if is_sweep(runs) else _distribution(runs, details)
    try:
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120)
    finally:
        _pyplot().close(fig)
    return write_bytes_atomic(path, buf.getvalue())


def run_details(runs: Sequence[BenchRun], passes: Sequence[PassResult]) -> list[dict]:
    """Each run's per-request lists: from its passes' records when at hand, else the run's --save-detailed
    lists. UsageError when a histogram needs lists that are not there."""
    from omnicli.benchmark.metrics import detailed_lists

    if passes:
        return [detailed_lists(p.record_rounds) for p in passes]
    if is_sweep(runs):
        return [{} for _ in runs]
    if any(r.audio_ttfps is None or r.e2els is None or r.audio_durations is None for r in runs):
        raise UsageError("--plot of one load shape draws the latency histograms from the per-request lists, "
                         "and this result has none: run the bench with --save-detailed")
    return [{"audio_ttfps": r.audio_ttfps, "e2els": r.e2els, "audio_durations": r.audio_durations} for r in runs]


@dataclass
class PlotFile:
    path: Path

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        if (missing := plot_missing()) is not None:
            raise UsageError(missing)
        written = plot_results(report.runs, run_details(report.runs, passes), self.path)
        err_console.print(f"plot: {written}", highlight=False)
