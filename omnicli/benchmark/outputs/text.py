"""`--format text`: the rows of the console table as plain `Label: value` lines, for grep and diff."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from omnicli.benchmark.outputs.table import engine_views, interleaved_rows, print_failures, table_rows
from omnicli.benchmark.report import group_by_shape
from omnicli.benchmark.result_models import BenchDocument, BenchRun
from omnicli.runtime.safe_text import printable

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult


def run_heading(run: BenchRun) -> str:
    shape = [f"c={run.max_concurrency}" if run.max_concurrency is not None else "no cap"]
    if run.request_rate != "inf":
        shape.append(f"rate={run.request_rate:g}/s")
    return f"{printable(run.profile_label)} {' '.join(shape)}"


def text_lines(runs: Sequence[BenchRun], percentiles: Sequence[float]) -> list[str]:
    """`== profile c=N ==` then one `Label: value` line per table row, per run."""
    lines: list[str] = []
    for run in runs:
        lines.append(f"== {run_heading(run)} ==")
        lines.append(f"Model: {printable(run.model)}")
        lines.append(f"Device: {printable(run.device)}")
        lines.extend(f"{label}: {value}" for label, _, value in table_rows(run, percentiles))
        for entry, view in zip(run.per_engine or [], engine_views(run)):  # --ray: each engine after the total
            lines.append(f"== {run_heading(run)} engine {entry.engine} ==")
            if view is None:
                lines.append(f"Engine error: {printable(entry.engine_error)}")
            else:
                lines.extend(f"{label}: {value}" for label, _, value in table_rows(view, percentiles))
    for group in group_by_shape(runs):  # --interleave: each metric of b against a, over the rounds
        for other in group[1:]:
            if group[0].interleaved and other.interleaved:
                lines.append(f"== interleaved {printable(other.profile_label)}/{run_heading(group[0])} ==")
                lines.extend(f"{label}: {a} | {b} | {summary}"
                             for label, a, b, summary in interleaved_rows(group[0], other))
    return lines


class TextOutput:
    """Plain lines on stdout, then the failed requests as the table output lists them."""

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        for line in text_lines(report.runs, report.percentiles):
            typer.echo(line)
        print_failures(report.runs)
