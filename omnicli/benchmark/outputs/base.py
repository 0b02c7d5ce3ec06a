"""What every output of `omni bench` / `omni bench-export` is: an object whose `finalize(report, passes)`
shows or writes the finished report.

`report` is the `BenchDocument` (the same object a saved result file loads back as); `passes` are the
measured passes behind it when they are at hand (a live run: their per-request records), empty when a
saved file is re-rendered. An output that needs them (the vLLM per-run files) says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from omnicli.benchmark.result_models import BenchDocument
    from omnicli.benchmark.session import PassResult


class OutputFormat(str, Enum):
    """What goes to stdout: the Rich tables, plain `Label: value` lines, or the result document as JSON."""

    table = "table"
    text = "text"
    json = "json"


class BenchOutput(Protocol):
    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None: ...
