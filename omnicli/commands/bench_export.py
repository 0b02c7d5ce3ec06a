"""`omni bench-export`: re-render a saved `omni bench` result file (tables, text, JSON, CSV, plot)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from omnicli.benchmark.outputs import OutputFormat


def bench_export(
    result: Annotated[Path, typer.Argument(
        metavar="RESULT.json", help="An omni bench summary file (omni-bench-*.json).", show_default=False)],
    csv_path: Annotated[
        Optional[Path], typer.Option("--csv", metavar="FILE", help="Write the results table as CSV.")
    ] = None,
    plot: Annotated[
        Optional[Path], typer.Option("--plot", metavar="FILE", help="Write the PNG plot (needs omnicli[plot]).")
    ] = None,
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", help="Console output: a table, `Key: value` lines, or the document as JSON."),
    ] = OutputFormat.table,
) -> None:
    """Show a saved `omni bench` result again, and write its CSV or plot, as the run itself would have.

    Reads files of any omni version with a `schema_version` of 1 or none. A single load shape's
    plot needs the per-request lists (a run with --save-detailed). Exit code: 0 done, 2 the file
    cannot be read (or is not a bench result) or an option cannot be carried out.
    """
    from omnicli.benchmark.outputs.finalize import export_result

    export_result(result, console=output_format, csv_path=csv_path, plot=plot)
