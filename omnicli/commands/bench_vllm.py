"""`omni bench` as a drop-in for `vllm bench serve` / `vllm bench serve --omni`: their command-line
flags turned into omni's, and the vLLM-shaped result files and timelines written (docs/bench.md).

Presentation and option mapping only; the figures are `omnicli.benchmark.metrics`', the file
layout `omnicli.benchmark.vllm_format`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from omnicli.commands.common import err_console, note
from omnicli.engine.request import TTSRequest

T = TypeVar("T")


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


def itl_thresholds(text: str) -> list[float]:
    """vLLM's `--timeline-itl-thresholds 25,50` (ms) -> [0.025, 0.05] s."""
    try:
        values = [float(t) / 1000.0 for t in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not two numbers (ms), e.g. 25,50") from None
    if len(values) != 2:
        raise ValueError(f"{text!r}: give two thresholds (ms), e.g. 25,50")
    return values


@dataclass
class Compat:
    """vLLM-Omni's flags turned into omni's."""

    manifest: Path | None
    max_new_tokens: int | None
    sets: list[str]
    request_fields: dict[str, Any]  # TTSRequest fields each request gets unless its row sets them


def vllm_compat(
    dataset_name: str | None, dataset_path: Path | None, locale: str, manifest: Path | None, extra_body: str | None,
    output_len: int | None, max_new_tokens: int | None, *, sampling: dict[str, Any], ignored: dict[str, Any],
) -> Compat:
    """vLLM-Omni's dataset, request and sampling flags as omni's manifest, caps and --set
    overrides (usage errors exit 2); server flags are reported once as not applying."""
    given = [flag for flag, value in ignored.items() if value is not None]
    if given:
        note(f"{', '.join(given)}: vLLM server option(s), not applying to the embedded engine (ignored)")
    if dataset_name is not None and dataset_name != "seed-tts":
        raise typer.BadParameter(f"{dataset_name!r}: omni bench reads the seed-tts dataset (a meta.lst)", param_hint="--dataset-name")
    if locale not in ("en", "zh"):
        raise typer.BadParameter(f"{locale!r}: choose en or zh", param_hint="--seed-tts-locale")
    if dataset_path is not None:
        if manifest is not None:
            raise typer.BadParameter("give the manifest either as MANIFEST/--manifest or with --dataset-path, not both", param_hint="--dataset-path")
        if not dataset_path.exists():
            raise typer.BadParameter(f"{dataset_path}: no such local folder (omni reads a local copy of the seed-tts-eval "
                                     "set: DIR/en/meta.lst, DIR/zh/meta.lst; it downloads nothing)", param_hint="--dataset-path")
        manifest = dataset_path / locale / "meta.lst" if dataset_path.is_dir() else dataset_path
    elif dataset_name is not None:
        raise typer.BadParameter("--dataset-name seed-tts needs --dataset-path DIR (a local seed-tts-eval folder)", param_hint="--dataset-path")
    body: dict[str, Any] = {}
    if extra_body is not None:
        try:
            body = json.loads(extra_body)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
        if not isinstance(body, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
    caps = {v for v in (output_len, max_new_tokens, body.pop("max_new_tokens", None), body.pop("max_tokens", None)) if v is not None}
    if len(caps) > 1:
        raise typer.BadParameter(f"different token caps given ({', '.join(map(str, sorted(caps)))})", param_hint="--max-new-tokens")
    cap = caps.pop() if caps else None
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise typer.BadParameter(f"max_new_tokens must be a positive integer (got {cap!r})", param_hint="--extra-body")
    for key in ("temperature", "top_p", "top_k", "repetition_penalty"):  # vLLM merges sampling flags into the body
        if sampling.get(key) is None and key in body:
            sampling[key] = body.pop(key)
        body.pop(key, None)
    sets = [f"talker.{key}={value}" for key, value in sampling.items() if value is not None]
    request_keys = {f.name for f in dataclasses.fields(TTSRequest)} - {"request_id", "text", "ref_audio", "ref_sample_rate", "max_new_tokens"}
    fields = {k: v for k, v in body.items() if k in request_keys}
    unused = [k for k in body if k not in request_keys]
    if unused:
        note(f"--extra-body: {', '.join(unused)} not used by omni's requests (ignored)")
    return Compat(manifest, cap, sets, fields)


def parsed(parse: Callable[..., T], value: object, hint: str) -> T:
    """`parse(value)`, its ValueError a usage error of option `hint`."""
    try:
        return parse(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None


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
