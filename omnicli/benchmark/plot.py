"""Benchmark plots (PNG, matplotlib's Agg backend: no display needed).

A concurrency sweep plots audio throughput and first-audio latency against
concurrency, one line per profile; a single load shape plots the latency
distributions (first audio and end-to-end), one histogram per profile.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from omnicli.atomic import write_bytes_atomic


def is_sweep(runs: Sequence[dict]) -> bool:
    values = {r["max_concurrency"] for r in runs}
    return len(values) > 1 and None not in values


def _by_profile(runs: Sequence[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        out.setdefault(run["profile_label"], []).append(i)
    return out


def _sweep(runs: Sequence[dict]):
    fig, (ax_tp, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, idx in _by_profile(runs).items():
        pts = sorted((runs[i]["max_concurrency"], runs[i]) for i in idx)
        xs = [c for c, _ in pts]
        ax_tp.plot(xs, [r["audio_throughput"] for _, r in pts], marker="o", label=label)
        mean = [r.get("mean_audio_ttfp_ms") for _, r in pts]
        ax_lat.plot(xs, [m if m is not None else float("nan") for m in mean], marker="o", label=f"{label} mean")
        p99 = [r.get("p99_audio_ttfp_ms") for _, r in pts]
        if any(v is not None for v in p99):
            ax_lat.plot(xs, [v if v is not None else float("nan") for v in p99], marker="x", linestyle="--", label=f"{label} p99")
    levels = sorted({r["max_concurrency"] for r in runs})
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


def _distribution(runs: Sequence[dict], details: Sequence[dict]):
    fig, (ax_ttfp, ax_e2el) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run, detail in zip(runs, details):
        label = run["profile_label"]
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
    title = runs[0]["label"].split("/", 1)[-1] if runs else ""
    fig.suptitle(f"Latency distribution ({title})")
    return fig


def plot_results(runs: Sequence[dict], details: Sequence[dict], path: str | os.PathLike) -> Path:
    """Writes the plot for these runs; `details[i]` are run i's per-request lists."""
    fig = _sweep(runs) if is_sweep(runs) else _distribution(runs, details)
    try:
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=120)
    finally:
        plt.close(fig)
    return write_bytes_atomic(path, buf.getvalue())
