"""The `omni bench` sweep table in forms other programs read: a CSV file and plain `Key: value` lines.

Both carry the rows of the console table (`bench_tables.table_rows`) for every run;
the CSV holds the raw numbers (one row per run, one column per metric key),
the text form the formatted values, one `Label: value` line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omnicli.atomic import write_text_atomic
from omnicli.benchmark.report import group_by_shape
from omnicli.commands.bench_tables import engine_views, interleaved_rows, table_rows

# Columns that identify a run, first in every CSV row.
ID_COLUMNS = ("profile_label", "profile_digest", "max_concurrency", "request_rate", "burstiness", "num_prompts",
              "completed", "failed")


def run_heading(run: dict) -> str:
    shape = [f"c={run['max_concurrency']}" if run.get("max_concurrency") is not None else "no cap"]
    if run.get("request_rate") not in ("inf", None):
        shape.append(f"rate={run['request_rate']:g}/s")
    return f"{run['profile_label']} {' '.join(shape)}"


def text_lines(runs: Sequence[dict], percentiles: Sequence[float]) -> list[str]:
    """`== profile c=N ==` then one `Label: value` line per table row, per run."""
    lines: list[str] = []
    for run in runs:
        lines.append(f"== {run_heading(run)} ==")
        lines.append(f"Model: {run.get('model')}")
        lines.append(f"Device: {run.get('device')}")
        lines.extend(f"{label}: {value}" for label, _, value in table_rows(run, percentiles))
        for entry, view in zip(run.get("per_engine") or [], engine_views(run)):  # --ray: each engine after the total
            lines.append(f"== {run_heading(run)} engine {entry['engine']} ==")
            if view is None:
                lines.append(f"Engine error: {entry['engine_error']}")
            else:
                lines.extend(f"{label}: {value}" for label, _, value in table_rows(view, percentiles))
    for group in group_by_shape(runs):  # --interleave: each metric of b against a, over the rounds
        for other in group[1:]:
            if group[0].get("interleaved") and other.get("interleaved"):
                lines.append(f"== interleaved {other['profile_label']}/{run_heading(group[0])} ==")
                lines.extend(f"{label}: {a} | {b} | {summary}" for label, a, b, summary in interleaved_rows(group[0], other))
    return lines


def sweep_frame(runs: Sequence[dict], percentiles: Sequence[float]):
    """A pandas DataFrame: one row per run, identifying columns then every table metric (raw values)."""
    import pandas as pd

    keys: list[str] = []
    for run in runs:
        for _, key, _ in table_rows(run, percentiles):
            if key is not None and key not in keys and key not in ID_COLUMNS:
                keys.append(key)
    columns = list(ID_COLUMNS) + keys
    return pd.DataFrame([{k: run.get(k) for k in columns} for run in runs], columns=columns)


def write_csv(path: str | Path, runs: Sequence[dict], percentiles: Sequence[float]) -> Path:
    """Writes the sweep table as CSV (atomically)."""
    return write_text_atomic(Path(path), sweep_frame(runs, percentiles).to_csv(index=False))
