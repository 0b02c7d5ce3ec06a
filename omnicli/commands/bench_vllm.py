"""`omni bench` as a drop-in for `vllm bench serve` / `vllm bench serve --omni`: their command-line
flags turned into omni's, and the vLLM-shaped result files and timelines written (docs/bench.md).

Presentation and option mapping only; the figures are `omnicli.benchmark.metrics`', the file
layout `omnicli.benchmark.vllm_format`'s.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from typer.core import TyperCommand

from omnicli.commands.common import err_console, note


class BenchCommand(TyperCommand):
    """`omni bench`'s command: also takes vLLM's `--metadata K=V K=V` and `--goodput K:V K:V`
    (several values after one flag, argparse's nargs), by repeating the flag before each."""

    MULTI_VALUE = {"--metadata": "=", "--goodput": ":"}

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_multi_values(args, self.MULTI_VALUE))


def spread_multi_values(args: list[str], flags: dict[str, str]) -> list[str]:
    """`[--metadata, a=1, b=2]` -> `[--metadata, a=1, --metadata, b=2]`: after the flag's value, each
    following word holding the flag's separator (and not starting with '-') is one more value."""
    out: list[str] = []
    flag = None  # the multi-value flag whose values are being read
    expect_value = False
    for arg in args:
        if expect_value:
            out.append(arg)
            expect_value = False
            continue
        name = arg.split("=", 1)[0] if arg.startswith("--") else None
        if name in flags:
            flag, expect_value = name, "=" not in arg
            out.append(arg)
        elif flag is not None and not arg.startswith("-") and flags[flag] in arg:
            out += [flag, arg]
        else:
            flag = None
            out.append(arg)
    return out


def write_vllm_files(results, runs: list[dict], report: Any) -> list[Path]:
    """One `vllm bench serve`-shaped file per run (several with --append-result, or each run's own
    name from a --result-filename template / beside it), and with --plot-timeline its timeline."""
    from omnicli.benchmark.metrics import detailed_lists, vllm_figures
    from omnicli.benchmark.result_models import VllmRunResult
    from omnicli.benchmark.vllm_format import read_results, result_filename, run_filename, vllm_result, write_result

    files = report.vllm
    folder = report.result_dir or Path(".")
    several_profiles = len({r["profile_label"] for r in runs}) > 1
    one_file_per_run = len(runs) > 1 and not files.append
    written: list[Path] = []
    for result, run in zip(results, runs):
        figures = vllm_figures(result.record_rounds, files.goodput)
        doc = vllm_result(
            run, date=report.date, label=files.label, metadata=files.metadata, percentile_metrics=files.metrics,
            percentiles=report.percentiles, figures=figures, detailed=detailed_lists(result.record_rounds),
            save_detailed=report.detailed, goodput=bool(files.goodput),
        )
        VllmRunResult.model_validate(doc)  # one definition of the file: a drift fails here, not in a reader
        profile = run["profile_label"] if several_profiles else ""
        if report.result_filename is None:
            name = result_filename(doc, profile_label=profile or None)
        else:
            name = run_filename(report.result_filename, doc, profile_label=profile, one_file_per_run=one_file_per_run)
            if one_file_per_run and folder / name in written:  # a template that does not tell these runs apart
                name = run_filename(Path(name).stem + Path(name).suffix, doc, profile_label=profile, one_file_per_run=True)
        path = folder / name
        if files.save:
            write_result(path, doc, append=files.append)
            if path not in written:
                written.append(path)
        if files.timeline is not None:
            plot_timeline(path, figures, files.timeline)
    if files.append:
        for path in written:
            if len(read_results(path)) > 1:
                note(f"{path} holds {len(read_results(path))} results, one per line (vLLM's --append-result layout): "
                     "json.load reads a single one; read it line by line (omnicli.benchmark.vllm_format.read_results)")
    return written


def timeline_missing() -> str | None:
    """Why --plot-timeline cannot draw (checked before any engine starts), or None."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        return "--plot-timeline draws with vLLM's plot, which needs plotly: pip install plotly"
    return None


def plot_timeline(result_path: Path, figures: dict, thresholds: list[float]) -> None:
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
