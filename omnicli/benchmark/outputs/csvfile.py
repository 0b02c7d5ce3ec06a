"""`--csv FILE`: the sweep table as CSV (stdlib csv), one row per run, raw values.

The columns: the ones that identify a run, then every metric key of the console table
(`table.table_rows`), in the table's order.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.atomic import write_text_atomic
from omnicli.benchmark.outputs.table import table_rows
from omnicli.benchmark.result_models import BenchDocument, BenchRun
from omnicli.runtime.console import err_console

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult

# Columns that identify a run, first in every CSV row.
ID_COLUMNS = ("profile_label", "profile_digest", "max_concurrency", "request_rate", "burstiness", "num_prompts",
              "completed", "failed")


def sweep_columns(runs: Sequence[BenchRun], percentiles: Sequence[float]) -> list[str]:
    keys: list[str] = list(ID_COLUMNS)
    for run in runs:
        for _, key, _ in table_rows(run, percentiles):
            if key is not None and key not in keys:
                keys.append(key)
    return keys


def _cell(value: Any) -> str:
    """A raw value as pandas' to_csv wrote it: empty for none, numbers as Python prints them."""
    if value is None:
        return ""
    return str(value)  # bool -> True/False, float -> repr, "inf" stays "inf"


def sweep_csv(runs: Sequence[BenchRun], percentiles: Sequence[float]) -> str:
    """The CSV text: a header, then one row per run."""
    columns = sweep_columns(runs, percentiles)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for run in runs:
        writer.writerow([_cell(run.figure(key)) for key in columns])
    return out.getvalue()


def write_csv(path: str | Path, runs: Sequence[BenchRun], percentiles: Sequence[float]) -> Path:
    """Writes the sweep table as CSV (atomically)."""
    return write_text_atomic(Path(path), sweep_csv(runs, percentiles))


@dataclass
class CsvFile:
    path: Path

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        written = write_csv(self.path, report.runs, report.percentiles)
        err_console.print(f"csv: {written}", highlight=False)
