"""`omni eval`: WER, speaker similarity (SIM) and predicted MOS of generated speech (parse, score, print).

The work lives in `omnicli.evaluation.pipeline` (`Evaluator` -> `EvalReport`);
this module reads the options, shows progress, prints the tables and the
paths. `omni eval-wer` (commands/eval_wer.py) is `run` with `--metrics wer`
and eval-wer's file names.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.progress import Progress, TaskID

from omnicli.commands.common import (
    ProfileOption,
    QuietOption,
    SetOption,
    VerboseOption,
    progress_bar,
    require_folder,
    resolve_profile,
)
from omnicli.commands.report import ReportOption, check_report_option, report_after_run
from omnicli.errors import Interrupted, OutputError, UsageError
from omnicli.runtime.console import console, err_console, set_verbosity, status

if TYPE_CHECKING:
    from omnicli.evaluation.eval_report import EvalReport, ResultFiles
    from omnicli.evaluation.pipeline import EvalArgs


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def run(args: EvalArgs, *, profile: str | None, sets: list[str] | None, report_file: Path | None) -> int:
    """Checks, loads the models once, scores in one pass, writes and prints; returns the exit code."""
    from omnicli.evaluation.eval_report import RunContext
    from omnicli.evaluation.pipeline import read_eval_rows
    from omnicli.retention import Retainer

    check_report_option(report_file)
    resolved = resolve_profile(profile, sets)
    rows = read_eval_rows(args.manifest)
    evaluator = args.evaluator(resolved.profile.device)
    require_folder(args.out_dir, "--out")
    if args.transcripts is not None and args.asr is not None:
        err_console.print("[yellow]warning:[/yellow] --asr is ignored with --transcripts (no ASR runs)")
    retainer = Retainer.from_option(args.keep_failed)
    context = RunContext(args.manifest, resolved.name, resolved.digest, retainer)
    observer = ProgressObserver()
    evaluator.load(observer)  # a missing model: exit 2; one that fails to load: exit 3 (omnicli.cli)
    try:
        with progress_bar(err_console, failed_label="failed/missing") as bar:
            observer.bar = bar
            report = evaluator.score(rows, args.gen_dir, thresholds=args.thresholds(resolved.profile.retention),
                                     context=context, command=args.command, observer=observer)
    except KeyboardInterrupt:
        raise Interrupted("no results written") from None
    _write(report, args.out_dir, args.files)
    if retainer is not None and retainer.errors:
        err_console.print(f"[yellow]warning:[/yellow] {retainer.errors} retained file(s) could not be written: "
                          f"{retainer.error_messages[0]}")
    report_after_run(report_file, [args.gen_dir, args.out_dir, *([args.keep_failed] if args.keep_failed else [])])
    return report.exit_code


class ProgressObserver:
    """The pipeline's `EvalObserver` on the terminal: a spinner while loading, a bar per metric group."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._failed: dict[str, int] = {}

    def loading(self, what: str) -> AbstractContextManager[Any]:
        return status(what)

    def begin(self, tasks: Sequence[tuple[str, str]], total: int) -> None:
        for key, description in tasks:
            if self.bar is not None:
                self._tasks[key] = self.bar.add_task(description, total=total, failed=0, visible=False)
            self._failed[key] = 0

    def advance(self, task: str, scored: bool) -> None:
        self._failed[task] += 0 if scored else 1
        if self.bar is not None:
            self.bar.update(self._tasks[task], advance=1, failed=self._failed[task], visible=True)


def _write(report: EvalReport, out_dir: Path, files: ResultFiles) -> None:
    try:
        paths = report.write(out_dir, files)
    except OSError as exc:
        raise OutputError(f"cannot write results to {out_dir}: {exc}") from None
    finally:
        from omnicli.evaluation.display import report_tables

        for table in report_tables(report.summary):
            console.print(table)
    seed = f"; seed-tts-eval: {paths['seed_wer']}" if "seed_wer" in paths else ""
    err_console.print(f"results: {paths['tsv']}, {paths['jsonl']}; summary: {paths['summary']}{seed}")


def eval_command(
    gen_dir: Annotated[Path, typer.Argument(help="Folder holding the generated <utt>.wav files.", show_default=False)],
    manifest: Annotated[Path, typer.Option(
        "--manifest", "-m", help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav]) or JSONL.")],
    metrics: Annotated[str, typer.Option(
        "--metrics", help="Any subset of wer,sim,mos, comma-separated.")] = "wer,sim,mos",
    lang: Annotated[Lang, typer.Option("--lang", "-l", help="Language of the texts: en (WER) or zh (CER).")] = Lang.en,
    asr: Annotated[Optional[str], typer.Option(
        "--asr", help="WER: BACKEND[:MODEL], as omni eval-wer. Local models only.",
        show_default="openai-whisper:large-v3 (zh: funasr:paraformer-zh when installed)")] = None,
    sim: Annotated[str, typer.Option(
        "--sim", help="SIM backend: dvector (bundled GE2E d-vector) or wavlm[:REPO_ID|/dir] (local WavLMForXVector).",
    )] = "dvector",
    mos: Annotated[str, typer.Option(
        "--mos", help="MOS backend(s), comma-separated: dnsmos (bundled) and/or utmos[:/path/utmos.ts].")] = "dnsmos",
    trust_torchscript: Annotated[bool, typer.Option(
        "--trust-torchscript", help="Load the utmos TorchScript file: it is a program that can read and "
        "write files; pass this only for a file you exported or trust.")] = False,
    threshold: Annotated[Optional[float], typer.Option(
        "--threshold", min=0.0, help="Retain audio whose WER exceeds this (fraction).",
        show_default="profile retention.asr_wer_threshold")] = None,
    sim_threshold: Annotated[Optional[float], typer.Option(
        "--sim-threshold", help="low_sim below this SIM.", show_default="profile retention.sim_threshold")] = None,
    mos_threshold: Annotated[Optional[float], typer.Option(
        "--mos-threshold", help="low_mos below this DNSMOS OVRL / UTMOS.",
        show_default="profile retention.mos_threshold")] = None,
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Folder for eval_results.tsv/.jsonl and eval_summary.json.",
        show_default="GEN_DIR/eval")] = None,
    transcripts: Annotated[Optional[Path], typer.Option(
        "--transcripts", help="WER: re-score cached transcripts (JSONL {utt,hyp} or TSV) without ASR.")] = None,
    keep_failed: Annotated[Optional[Path], typer.Option(
        "--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR",
        help="Retain audio with asr_mismatch/asr_empty/low_sim/low_mos here.", show_default="off")] = None,
    device: Annotated[Optional[Device], typer.Option(
        "--device", help="Where ASR and the torch scorers run.", show_default="profile device (auto)")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="Clips per batch (where the backend batches).")] = 8,
    max_new_tokens: Annotated[Optional[int], typer.Option(
        "--max-new-tokens", min=1, help="WER: cap on decoded tokens per clip.")] = None,
    profile: ProfileOption = None,
    sets: SetOption = None,
    report_file: ReportOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Score GEN_DIR/<utt>.wav for every manifest row: WER, speaker similarity to the row's reference audio, MOS.

    Exit codes: 0 every utterance scored by every metric, 1 some missing or
    failed, 2 bad usage or input (including a model that is not on this
    machine), 3 a model failed to load, 130 interrupted.
    """
    from omnicli.evaluation.eval_report import EVAL_FILES
    from omnicli.evaluation.pipeline import EvalArgs, parse_metrics

    set_verbosity(quiet, verbose)
    try:
        chosen = parse_metrics(metrics)
    except ValueError as exc:
        raise UsageError(f"--metrics {metrics!r}: {exc}") from None
    args = EvalArgs(
        gen_dir, manifest, chosen, EVAL_FILES, "eval", out=out, lang=lang.value, asr=asr, sim=sim, mos=mos,
        trust_torchscript=trust_torchscript, threshold=threshold, sim_threshold=sim_threshold,
        mos_threshold=mos_threshold, transcripts=transcripts, keep_failed=keep_failed,
        device=device.value if device else None, batch_size=batch_size, max_new_tokens=max_new_tokens,
    )
    raise typer.Exit(run(args, profile=profile, sets=sets, report_file=report_file))
