"""The result document as JSON: the summary file (`omni-bench-<time>.json`), or on stdout (`--format json`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from omnicli.benchmark.result_models import BenchDocument
from omnicli.runtime.console import err_console

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult


@dataclass
class JsonFile:
    """Writes the summary file (atomically; validated: it is the model's own dump)."""

    path: Path

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        report.write(self.path)
        err_console.print(f"results: {self.path}", highlight=False)


class JsonOutput:
    """`--format json`: the document on stdout, as the summary file holds it (nothing else goes there)."""

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        typer.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str))
