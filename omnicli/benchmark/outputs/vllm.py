"""`--save-result`: one `vllm bench serve`-shaped file per run (the layout: `benchmark/vllm_format.py`),
and with `--plot-timeline` vLLM's request timeline beside each. These need the passes' records
(vLLM's per-request lists and peaks), so a saved summary file cannot re-render them."""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.benchmark.result_models import BenchDocument
from omnicli.runtime.console import err_console, note

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult
    from omnicli.driver import LoadShape


@dataclass
class VllmFiles:
    """--save-result / --plot-timeline, as parsed: what the per-run files hold."""

    append: bool
    label: str | None
    metadata: dict
    metrics: list[str]
    goodput: dict[str, float] = field(default_factory=dict)  # --goodput SLOs
    timeline: list[float] | None = None  # --plot-timeline: the ITL thresholds (s)
    save: bool = True  # False: only --plot-timeline (no result file)


@dataclass
class VllmOutput:
    """Writes the per-run files of `files` into `folder` (names: vLLM's, or --result-filename's template)."""

    files: VllmFiles
    folder: Path
    date: str  # vLLM's %Y%m%d-%H%M%S, in the names and the files
    percentiles: Sequence[float]
    detailed: bool  # --save-detailed
    result_filename: str | None = None

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        if report.runs and len(passes) != len(report.runs):
            raise ValueError("the vLLM per-run files need the measured passes (their per-request records)")
        for path in self.write(report, passes):
            err_console.print(f"run result: {path}", highlight=False)

    def write(self, report: BenchDocument, passes: Sequence[PassResult]) -> list[Path]:
        """One file per run (several in one with --append-result), each timeline beside its file."""
        from omnicli.benchmark.metrics import detailed_lists, vllm_figures
        from omnicli.benchmark.result_models import VllmRunResult
        from omnicli.benchmark.vllm_format import read_results, result_filename, run_filename, vllm_result, write_result

        files, runs = self.files, report.runs
        several_profiles = len({r.profile_label for r in runs}) > 1
        one_file_per_run = len(runs) > 1 and not files.append
        written: list[Path] = []
        for result, run in zip(passes, runs):
            figures = vllm_figures(result.record_rounds, files.goodput)
            doc = vllm_result(
                run.to_dict(), date=self.date, label=files.label, metadata=files.metadata,
                percentile_metrics=files.metrics, percentiles=self.percentiles, figures=figures,
                detailed=detailed_lists(result.record_rounds), save_detailed=self.detailed, goodput=bool(files.goodput),
            )
            VllmRunResult.model_validate(doc)  # one definition of the file: a drift fails here, not in a reader
            profile = run.profile_label if several_profiles else ""
            if self.result_filename is None:
                name = result_filename(doc, profile_label=profile or None)
            else:
                name = run_filename(self.result_filename, doc, profile_label=profile, one_file_per_run=one_file_per_run)
                if one_file_per_run and self.folder / name in written:  # a template that does not tell these runs apart
                    name = run_filename(Path(name).stem + Path(name).suffix, doc, profile_label=profile,
                                        one_file_per_run=True)
            path = self.folder / name
            if files.save:
                write_result(path, doc, append=files.append)
                if path not in written:
                    written.append(path)
            if files.timeline is not None:
                plot_timeline(path, figures, files.timeline)
        if files.append:
            for path in written:
                if len(read_results(path)) > 1:
                    note(f"{path} holds {len(read_results(path))} results, one per line (vLLM's --append-result "
                         "layout): json.load reads a single one; read it line by line "
                         "(omnicli.benchmark.vllm_format.read_results)")
        return written


def append_targets(files: VllmFiles, folder: Path, date: str, result_filename: str | None,
                   runs: Sequence[tuple[str, LoadShape, str]]) -> list[Path]:
    """The files `--append-result` will append to, named as `VllmOutput.write` names them, for `runs`
    (profile label, load shape, model) known before the run: checked before any engine starts."""
    from omnicli.benchmark.vllm_format import BACKEND, run_filename
    from omnicli.benchmark.vllm_format import result_filename as default_name

    several_profiles = len({label for label, _, _ in runs}) > 1
    paths: list[Path] = []
    for label, shape, model in runs:
        doc: dict[str, Any] = {"label": files.label or BACKEND, "model_id": model, "date": date,
                               "max_concurrency": shape.concurrency,
                               "request_rate": shape.request_rate if math.isfinite(shape.request_rate) else "inf"}
        if shape.ramp_up is not None:
            doc.update(ramp_up_strategy=shape.ramp_up, ramp_up_start_rps=shape.ramp_start,
                       ramp_up_end_rps=shape.ramp_end)
        profile = label if several_profiles else ""
        name = default_name(doc, profile_label=profile or None) if result_filename is None else \
            run_filename(result_filename, doc, profile_label=profile, one_file_per_run=False)
        if folder / name not in paths:
            paths.append(folder / name)
    return paths


def plot_timeline(result_path: Path, figures: dict[str, Any], thresholds: list[float]) -> None:
    """vLLM's request timeline (`vllm bench serve --plot-timeline`) of one run, beside its result file;
    a failure is a warning (the results are written already)."""
    from vllm.benchmarks.plot import generate_timeline_plot

    requests = [
        {"start_time": start, "ttft": ttft, "itl": itl, "latency": ttft + sum(itl) if itl else ttft,
         "prompt_len": prompt_len, "output_tokens": output_len}
        for start, ttft, itl, prompt_len, output_len in zip(
            figures["start_times"], figures["ttfts"], figures["itls"], figures["input_lens"], figures["output_lens"])
    ]
    path = result_path.with_suffix(".timeline.html")
    # vLLM prints where it saved it (stdout is for results); plotly warns about its own date parsing
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            generate_timeline_plot(requests, path, itl_thresholds=thresholds)
    except Exception as exc:  # a plot must never cost the measured results
        err_console.print(f"[yellow]warning:[/yellow] no timeline for {result_path.name}: {type(exc).__name__}: {exc}")
        return
    err_console.print(f"timeline: {path}", highlight=False)


def timeline_missing() -> str | None:
    """Why --plot-timeline cannot draw (checked before any engine starts), or None."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        return "--plot-timeline draws with vLLM's plot, which needs plotly: pip install plotly"
    return None
