"""What to show and write about the passes of one `omni bench` (`ReportPlan`, built by option parsing)
and the one call that does it at the end (`report_passes`): the outputs are chosen once, as a list,
and each is finalized with the same report object."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.benchmark.outputs.base import BenchOutput, OutputFormat
from omnicli.benchmark.outputs.csvfile import CsvFile
from omnicli.benchmark.outputs.jsonfile import JsonFile, JsonOutput
from omnicli.benchmark.outputs.plot import PlotFile, plot_missing
from omnicli.benchmark.outputs.table import TableOutput
from omnicli.benchmark.outputs.text import TextOutput
from omnicli.benchmark.outputs.vllm import VllmFiles, VllmOutput
from omnicli.errors import UsageError

if TYPE_CHECKING:
    from omnicli.benchmark.result_models import BenchRun

# --format: what goes to stdout.
CONSOLE_OUTPUTS: dict[OutputFormat, Callable[[], BenchOutput]] = {
    OutputFormat.table: TableOutput,
    OutputFormat.text: TextOutput,
    OutputFormat.json: JsonOutput,
}


@dataclass
class ReportPlan:
    """What to print and write about the completed passes; also used by a forced exit.

    The names of the files are chosen once (`path`, `date`), so a forced exit and the normal
    end write the same files. A `--plot` that cannot draw here is refused at once (UsageError).
    """

    percentiles: Sequence[float]
    started_at: str
    detailed: bool
    result_dir: Path | None
    result_filename: str | None
    plot: Path | None
    vllm: VllmFiles | None = None
    csv_path: Path | None = None
    text: bool = False  # --format text (kept for callers that set it; `console` says the same)
    extras: dict[str, dict] = field(default_factory=dict)  # pass label -> keys added to its result entry
    report_file: Path | None = None  # --report: the HTML page, from the summary file and report_dirs
    report_dirs: list[Path] = field(default_factory=list)
    quiet_progress: bool = False  # --disable-tqdm
    console: OutputFormat = OutputFormat.table

    def __post_init__(self) -> None:
        if self.text:
            self.console = OutputFormat.text
        self.path: Path | None = None
        self.date = datetime.now().strftime("%Y%m%d-%H%M%S")  # vLLM's `date` and file-name stamp
        summary_name = f"omni-bench-{self.date}.json"
        if self.vllm is not None:  # --result-filename names the per-run files; the summary goes beside them
            if self.vllm.save or self.result_dir is not None:  # (--plot-timeline alone writes no file of its own)
                self.path = (self.result_dir or Path(".")) / summary_name
        elif self.result_dir is not None or self.result_filename is not None:
            self.path = (self.result_dir or Path(".")) / (self.result_filename or summary_name)
        elif self.report_file is not None:  # the page reads the summary file: it goes beside the page
            self.path = self.report_file.parent / summary_name
        if self.plot is not None and (missing := plot_missing()) is not None:
            raise UsageError(missing)

    def outputs(self, *, forced: bool = False) -> list[BenchOutput]:
        """The outputs, in the order they run: stdout, the summary file, the per-run files, CSV, plot.
        `forced` (a second Ctrl-C): no plot (matplotlib is slow to load)."""
        chosen: list[BenchOutput] = [CONSOLE_OUTPUTS[self.console]()]
        if self.path is not None:
            chosen.append(JsonFile(self.path))
        if self.vllm is not None:
            chosen.append(VllmOutput(self.vllm, self.result_dir or Path("."), self.date, self.percentiles,
                                     self.detailed, self.result_filename))
        if self.csv_path is not None:
            chosen.append(CsvFile(self.csv_path))
        if self.plot is not None and not forced:
            chosen.append(PlotFile(self.plot))
        return chosen


def report_passes(
    results: Sequence[Any], plan: ReportPlan, *, interrupted: bool = False, unfinished: str | None = None,
    engine_error: str | None = None, forced: bool = False, runs: Sequence[BenchRun | Mapping[str, Any]] | None = None,
    ray: dict | None = None,
) -> int:
    """Shows and writes the report of the completed passes (`results`: `PassResult`s) as `plan` says;
    returns 0, or 1 when some request failed or produced no audio.

    `runs`: the runs when the caller built them (--ray: merged over engines, as dicts or `BenchRun`s);
    `ray`: the result file's `ray` entry. On a forced exit (`forced`) no plot and no HTML page.
    """
    from omnicli.benchmark.report import build_document, build_run
    from omnicli.runtime.console import err_console
    from omnicli.runtime.machine import machine_facts

    if unfinished is not None and (interrupted or engine_error):
        why = "interrupted" if interrupted else "ended by the engine failure"
        err_console.print(f"[yellow]{unfinished}[/yellow] was {why} and is not reported "
                          "(an incomplete pass would mislead)")
    if not results:
        if (interrupted or engine_error) and plan.path is not None:  # the file says how it ended, with no pass
            empty = build_document([], plan.started_at, plan.percentiles, interrupted=interrupted,
                                   engine_error=engine_error, unfinished=unfinished, ray=ray)
            JsonFile(plan.path).finalize(empty)
        return 0
    if runs is None:
        machine = machine_facts(results[0].device)
        runs = [build_run(r, percentiles=plan.percentiles, detailed=plan.detailed, machine=machine,
                          extra=plan.extras.get(r.label)) for r in results]
    report = build_document(runs, plan.started_at, plan.percentiles, interrupted=interrupted,
                            engine_error=engine_error, unfinished=unfinished, ray=ray)
    for output in plan.outputs(forced=forced):
        output.finalize(report, results)
    # a request without audio failed, as vLLM-Omni's speech endpoint fails it
    return 1 if any(run.failures or run.num_empty_audio for run in report.runs) else 0


def export_result(path: Path, *, console: OutputFormat = OutputFormat.table, csv_path: Path | None = None,
                  plot: Path | None = None) -> None:
    """`omni bench-export`: a saved result file re-rendered by the outputs a run would use (UsageError when the
    file cannot be read back, or --plot cannot draw)."""
    from omnicli.benchmark.result_models import BenchDocument

    if plot is not None and (missing := plot_missing()) is not None:
        raise UsageError(missing)
    report = BenchDocument.load(path)
    chosen: list[BenchOutput] = [CONSOLE_OUTPUTS[console]()]
    chosen += [CsvFile(csv_path)] if csv_path is not None else []
    chosen += [PlotFile(plot)] if plot is not None else []
    for output in chosen:
        output.finalize(report)
