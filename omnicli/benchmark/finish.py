"""What a bench run prints and writes at its end: tables or text, the result file, the vLLM per-run
files, the CSV, the plot, the --report page.

Moved whole out of `commands/bench.py` (the library run calls it, a forced exit too); the output
plug-ins of `omnicli.benchmark.outputs` take its place. Until then it renders through the
command layer's tables and consoles, imported when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path


class OutputFormat(str, Enum):
    table = "table"
    text = "text"


@dataclass
class _VllmFiles:
    """--save-result: one `vllm bench serve`-shaped file per run."""

    append: bool
    label: str | None
    metadata: dict
    metrics: list[str]
    goodput: dict[str, float] = field(default_factory=dict)  # --goodput SLOs
    timeline: list[float] | None = None  # --plot-timeline: the ITL thresholds (s)
    save: bool = True  # False: only --plot-timeline (no result file)


@dataclass
class _Report:
    """What to print and write about the completed passes; also used by a forced exit."""

    percentiles: Sequence[float]
    started_at: str
    detailed: bool
    result_dir: Path | None
    result_filename: str | None
    plot: Path | None
    vllm: _VllmFiles | None = None
    csv_path: Path | None = None
    text: bool = False
    extras: dict[str, dict] = field(default_factory=dict)  # pass label -> keys added to its result entry
    report_file: Path | None = None  # --report: the HTML page, from the summary file and report_dirs
    report_dirs: list[Path] = field(default_factory=list)
    quiet_progress: bool = False  # --disable-tqdm

    def __post_init__(self) -> None:
        # Chosen once, so a forced exit and the normal end write the same files.
        self.path = None
        self.date = datetime.now().strftime("%Y%m%d-%H%M%S")  # vLLM's `date` and file-name stamp
        summary_name = f"omni-bench-{self.date}.json"
        if self.vllm is not None:  # --result-filename names the per-run files; the summary goes beside them
            if self.vllm.save or self.result_dir is not None:  # (--plot-timeline alone writes no file of its own)
                self.path = (self.result_dir or Path(".")) / summary_name
        elif self.result_dir is not None or self.result_filename is not None:
            self.path = (self.result_dir or Path(".")) / (self.result_filename or summary_name)
        elif self.report_file is not None:  # the page reads the summary file: it goes beside the page
            self.path = self.report_file.parent / summary_name


def _report(
    results, report: _Report, *, interrupted: bool = False, unfinished: str | None = None,
    engine_error: str | None = None, forced: bool = False, runs: list[dict] | None = None, ray: dict | None = None,
) -> int:
    """Prints the tables, writes the JSON and plot (not on a forced exit); returns 0 or 1 (some failed).

    `runs`: the result dicts when the caller built them (--ray: merged over engines); `ray`: the
    result file's `ray` entry.
    """
    import typer

    from omnicli.atomic import write_json_atomic
    from omnicli.benchmark.metrics import detailed_lists
    from omnicli.benchmark.report import build_document, build_run, machine_facts
    from omnicli.commands.bench_tables import comparison_tables, engine_tables, interleaved_tables, results_table
    from omnicli.commands.bench_vllm import write_vllm_files
    from omnicli.commands.common import EXIT_OK, EXIT_SOME_FAILED, console, err_console
    from omnicli.commands.report import report_after_run

    if unfinished is not None and (interrupted or engine_error):
        why = "interrupted" if interrupted else "ended by the engine failure"
        err_console.print(f"[yellow]{unfinished}[/yellow] was {why} and is not reported "
                          "(an incomplete pass would mislead)")
    if not results:
        if interrupted and report.path is not None:  # the result file says how it ended, with no pass to report
            write_json_atomic(report.path, build_document([], report.started_at, report.percentiles, interrupted=True,
                                                          unfinished=unfinished, ray=ray))
            err_console.print(f"results: {report.path}", highlight=False)
        return EXIT_OK
    if runs is None:
        machine = machine_facts(results[0].device)
        runs = [
            build_run(r, percentiles=report.percentiles, detailed=report.detailed, machine=machine,
                      extra=report.extras.get(r.label))
            for r in results
        ]
    if report.text:
        from omnicli.commands.bench_export import text_lines

        for line in text_lines(runs, report.percentiles):
            typer.echo(line)
    else:
        console.print(results_table(runs, report.percentiles))
        for table in engine_tables(runs, report.percentiles):
            console.print(table)
        if len({r["profile_label"] for r in runs}) > 1:
            for table in comparison_tables(runs, report.percentiles):
                console.print(table)
            for table in interleaved_tables(runs):
                console.print(table)
    failed = [f for run in runs for f in run["failures"]]
    if failed:
        console.print(f"[red]{len(failed)} failed request(s):[/red]")
        for f in failed[:20]:
            console.print(f"  {f['utt']} ({f['request_id']}): {f['error']}")
        if len(failed) > 20:
            console.print(f"  ... and {len(failed) - 20} more (see the result file)")
    empty = sum(r["num_empty_audio"] for r in runs)
    if empty:
        console.print(f"[yellow]{empty} request(s) completed with empty audio[/yellow] "
                      "(excluded from latency statistics)")
    if report.path is not None:
        document = build_document(
            runs, report.started_at, report.percentiles,
            interrupted=interrupted, engine_error=engine_error, unfinished=unfinished, ray=ray,
        )
        write_json_atomic(report.path, document)
        err_console.print(f"results: {report.path}", highlight=False)
    if report.vllm is not None:
        for path in write_vllm_files(results, runs, report):
            err_console.print(f"run result: {path}", highlight=False)
    if report.csv_path is not None:
        from omnicli.commands.bench_export import write_csv

        err_console.print(f"csv: {write_csv(report.csv_path, runs, report.percentiles)}", highlight=False)
    if report.plot is not None and not forced:  # matplotlib is slow to load: not while forcing an exit
        from omnicli.benchmark.plot import plot_results

        details = [detailed_lists(r.record_rounds) for r in results]
        err_console.print(f"plot: {plot_results(runs, details, report.plot)}", highlight=False)
    if not forced and report.path is not None:
        report_after_run(report.report_file, [report.path, *report.report_dirs])
    return EXIT_SOME_FAILED if failed else EXIT_OK
