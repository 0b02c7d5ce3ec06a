"""`omni eval-wer`: Seed-TTS-eval compatible WER of generated speech (parse, run, print).

The work lives in `omnicli.evaluation`; this module checks options, shows a
progress bar, prints the summary table and writes the result files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOME_FAILED,
    ProfileOption,
    QuietOption,
    SetOption,
    VerboseOption,
    console,
    err_console,
    fmt_number,
    progress_bar,
    require_folder,
    resolve_profile,
    set_verbosity,
    status,
    usage_error,
)
from omnicli.commands.report import ReportOption, check_report_option, report_after_run

app = typer.Typer(help="Seed-TTS-eval compatible WER of generated speech.")


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def _load_rows(manifest: Path):
    from omnicli.manifest import ManifestError, read_manifest

    try:
        # Prompt audio is not needed to score, so paths outside the manifest folder are fine.
        parsed = read_manifest(manifest, allow_outside_paths=True, check_audio=False, short_layouts=True)
    except ManifestError as exc:
        raise usage_error(str(exc)) from None
    if parsed.errors:
        for error in parsed.errors[:20]:
            err_console.print(f"[red]manifest error:[/red] {error}")
        if len(parsed.errors) > 20:
            err_console.print(f"... and {len(parsed.errors) - 20} more")
        raise usage_error(f"{manifest}: {len(parsed.errors)} bad row(s); fix them to evaluate every utterance")
    if not parsed.rows:
        raise usage_error(f"{manifest}: no utterances")
    return parsed.rows


def print_summary(summary: dict) -> None:
    asr = summary.get("asr") or {}
    source = asr.get("requested") or f"{asr.get('backend')}:{asr.get('model')}"
    table = Table(title=f"WER ({summary['language']}, {source})", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("note", style="dim")
    notes = summary.get("key_notes", {})
    for key in ("seed_wer_mean", "wer_mean_below_50", "sub", "del", "ins"):
        table.add_row(key, fmt_number(summary[key], 3), notes.get(key, ""))
    table.add_section()
    for key in ("corpus_wer", "median_wer", "share_wer_above_50", "wer_mean_failed_as_100"):
        table.add_row(f"[dim]{key}[/dim]", fmt_number(summary[key], 3), notes.get(key, ""))
    table.add_section()
    table.add_row("num_scored", str(summary["num_scored"]), f"of {summary['num_utts']} utterances")
    table.add_row("num_missing", str(summary["num_missing"]), "no wav (or no cached transcript)")
    table.add_row("num_failed", str(summary["num_failed"]), "empty/unreadable audio, ASR error, empty reference")
    table.add_row("num_empty_transcripts", str(summary["num_empty_transcripts"]), "scored as WER 100%, as seed-tts-eval does")
    table.add_row("num_above_threshold", str(summary["num_above_threshold"]), f"WER > {summary['wer_threshold']}")
    if summary["num_over_30s"]:
        table.add_row("num_over_30s", str(summary["num_over_30s"]), f"{summary['num_truncated']} cut to 30 s before ASR")
    if summary["keep_failed"]:
        table.add_row("num_retained", str(summary["num_retained"]), summary["keep_failed"])
    console.print(table)
    problems = [(utt, "missing", "no wav / no cached transcript") for utt in summary["missing"]] + [
        (f["utt"], f["status"], f["error"] or "") for f in summary["failed"]
    ]
    print_not_scored("not scored", problems)


def print_not_scored(title: str, problems: list[tuple[str, str, str]], shown: int = 20) -> None:
    """The first `shown` (utt, status, detail) rows that got no score, as a table."""
    if not problems:
        return
    listing = Table(title=title, title_justify="left")
    for column in ("utt", "status", "detail"):
        listing.add_column(column)
    for utt, state, detail in problems[:shown]:
        listing.add_row(utt, state, detail)
    if len(problems) > shown:
        listing.add_row("...", f"{len(problems) - shown} more", "see the results files")
    console.print(listing)


def eval_wer(
    gen_dir: Annotated[Path, typer.Argument(help="Folder holding the generated <utt>.wav files.", show_default=False)],
    manifest: Annotated[
        Path,
        typer.Option(
            "--manifest", "-m",
            help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav], or seed-tts-eval's utt|text and utt|text|prompt_wav) or JSONL.",
        ),
    ],
    lang: Annotated[Lang, typer.Option("--lang", "-l", help="Language of the texts: en (WER) or zh (CER).")] = Lang.en,
    asr: Annotated[
        Optional[str],
        typer.Option(
            "--asr",
            help="BACKEND[:MODEL]: openai-whisper[:large-v3|/path.pt], faster-whisper[:NAME|/ct2-dir|tiny.en-bundled], "
            "transformers[:REPO_ID|/dir], funasr[:paraformer-zh|/dir]. Local models only.",
            show_default="openai-whisper:large-v3; zh: funasr:paraformer-zh (Whisper only when chosen here)",
        ),
    ] = None,
    threshold: Annotated[
        Optional[float],
        typer.Option("--threshold", min=0.0, help="Retain audio whose WER exceeds this (fraction).", show_default="profile retention.asr_wer_threshold, 0.5"),
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Folder for wer_results.tsv/.jsonl and wer_summary.json.", show_default="GEN_DIR/eval_wer")
    ] = None,
    transcripts: Annotated[
        Optional[Path],
        typer.Option("--transcripts", help="Re-score cached transcripts (JSONL {utt,hyp} or TSV utt<TAB>hyp) without running ASR."),
    ] = None,
    keep_failed: Annotated[
        Optional[Path],
        typer.Option("--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR", help="Retain the ASR input of asr_mismatch/asr_empty utterances here.", show_default="off"),
    ] = None,
    device: Annotated[Optional[Device], typer.Option("--device", help="Where ASR runs.", show_default="profile device (auto)")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Clips per ASR batch (where the backend batches).")] = 8,
    max_new_tokens: Annotated[
        Optional[int], typer.Option("--max-new-tokens", min=1, help="Cap on decoded tokens per clip.", show_default="backend default (224 for openai-whisper)")
    ] = None,
    profile: ProfileOption = None,
    sets: SetOption = None,
    report_file: ReportOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Transcribe GEN_DIR/<utt>.wav for every manifest row and report Seed-TTS-eval WER.

    Exit codes: 0 every utterance scored, 1 some missing or failed, 2 bad usage
    or input (including an ASR model that is not on this machine), 3 the ASR
    model failed to load, 130 interrupted.
    """
    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    plan = _plan(
        gen_dir, manifest, lang=lang.value, asr=asr, threshold=threshold, out=out, transcripts=transcripts,
        keep_failed=keep_failed, device=device.value if device else None, batch_size=batch_size,
        max_new_tokens=max_new_tokens, profile=profile, sets=sets,
    )
    run = _run(plan)
    code = _report(plan, run)
    report_after_run(report_file, [plan.gen_dir, plan.out_dir, *([keep_failed] if keep_failed else [])])
    raise typer.Exit(code)


@dataclass
class _Plan:
    """Everything checked and loaded before the first clip is transcribed."""

    rows: list
    gen_dir: Path
    manifest: Path
    out_dir: Path
    lang: str
    threshold: float
    batch_size: int
    transcripts: Path | None
    resolved: Any  # the resolved profile (name, digest, settings)
    retainer: Any  # omnicli.retention.Retainer, or None when --keep-failed is off
    backend: Any  # the loaded ASR backend, or None with --transcripts
    cached: dict | None  # utt -> transcript, with --transcripts
    asr_info: dict


def _plan(
    gen_dir: Path, manifest: Path, *, lang: str, asr: str | None, threshold: float | None, out: Path | None,
    transcripts: Path | None, keep_failed: Path | None, device: str | None, batch_size: int,
    max_new_tokens: int | None, profile, sets,
) -> _Plan:
    """Checks the options and inputs, then loads the ASR model (or the cached transcripts)."""
    from omnicli.retention import Retainer

    resolved = resolve_profile(profile, sets)
    settings = resolved.profile
    rows = _load_rows(manifest)
    if transcripts is None and not gen_dir.is_dir():
        raise usage_error(f"{gen_dir}: generated-audio folder not found")
    out_dir = out or gen_dir / "eval_wer"
    require_folder(out_dir, "--out")
    retainer = Retainer.from_option(keep_failed)
    backend = cached = None
    if transcripts is not None:
        cached = _load_transcripts(transcripts, asr)
        asr_info = {"backend": "transcripts", "model": str(transcripts), "language": lang}
    else:
        backend, asr_info = _load_asr(asr, lang=lang, device=device or settings.device, max_new_tokens=max_new_tokens)
    return _Plan(
        rows=rows, gen_dir=gen_dir, manifest=manifest, out_dir=out_dir, lang=lang,
        threshold=settings.retention.asr_wer_threshold if threshold is None else threshold,
        batch_size=batch_size, transcripts=transcripts, resolved=resolved, retainer=retainer,
        backend=backend, cached=cached, asr_info=asr_info,
    )


def _load_transcripts(transcripts: Path, asr: str | None) -> dict:
    from omnicli.evaluation import TranscriptsError, read_transcripts

    if asr is not None:
        err_console.print("[yellow]warning:[/yellow] --asr is ignored with --transcripts (no ASR runs)")
    try:
        return read_transcripts(transcripts)
    except TranscriptsError as exc:
        raise usage_error(str(exc)) from None


def _load_asr(asr: str | None, *, lang: str, device: str, max_new_tokens: int | None) -> tuple[Any, dict]:
    """The loaded backend and how it is described in the summary; a missing model is bad usage (exit 2)."""
    from omnicli.evaluation import AsrError, AsrSetupError, AsrSpec, default_spec, load_backend

    try:
        spec = AsrSpec.parse(asr) if asr else default_spec(lang)
        with status(f"loading ASR {spec} ..."):
            backend = load_backend(spec, lang=lang, device=device, max_new_tokens=max_new_tokens)
    except AsrSetupError as exc:
        raise usage_error(str(exc)) from None
    except AsrError as exc:
        err_console.print(f"[red]ASR failed to load:[/red] {exc}")
        raise typer.Exit(EXIT_ENGINE) from None
    return backend, {"requested": str(spec), **backend.describe()}


def _run(plan: _Plan):
    """Transcribes and scores every row under a progress bar; Ctrl-C writes nothing (exit 130)."""
    from omnicli.evaluation import evaluate

    info = plan.asr_info
    retention_meta = {"profile_digest": plan.resolved.digest, "asr_backend": info["backend"], "asr_model": info["model"]}
    try:
        with progress_bar(err_console, failed_label="failed/missing") as progress:
            task = progress.add_task("scoring" if plan.cached is not None else "transcribing", total=len(plan.rows), failed=0)
            not_scored = 0

            def advance(result) -> None:
                nonlocal not_scored
                not_scored += 0 if result.scored else 1
                progress.update(task, advance=1, failed=not_scored)

            return evaluate(
                plan.rows, plan.gen_dir, lang=plan.lang, backend=plan.backend, transcripts=plan.cached,
                threshold=plan.threshold, batch_size=plan.batch_size, retainer=plan.retainer,
                retention_meta=retention_meta, on_result=advance,
            )
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]: no results written")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _report(plan: _Plan, run) -> int:
    """Writes the result files, prints the summary and returns the exit code."""
    from omnicli.evaluation import build_wer_summary, write_results

    summary = build_wer_summary(
        run, lang=plan.lang, threshold=plan.threshold, asr=plan.asr_info, manifest=plan.manifest,
        gen_dir=plan.gen_dir, transcripts_file=plan.transcripts, profile_name=plan.resolved.name,
        profile_digest=plan.resolved.digest, retainer=plan.retainer,
    )
    try:
        paths = write_results(plan.out_dir, run.results, summary)
    except OSError as exc:
        print_summary(summary)
        raise usage_error(f"cannot write results to {plan.out_dir}: {exc}") from None
    print_summary(summary)
    retainer = plan.retainer
    if retainer is not None and retainer.errors:
        err_console.print(f"[yellow]warning:[/yellow] {retainer.errors} retained file(s) could not be written: {retainer.error_messages[0]}")
    err_console.print(f"results: {paths['tsv']}, {paths['jsonl']}; summary: {paths['summary']}; seed-tts-eval: {paths['seed_wer']}")
    return EXIT_OK if summary["num_missing"] == 0 and summary["num_failed"] == 0 else EXIT_SOME_FAILED


app.command("eval-wer", no_args_is_help=True)(eval_wer)
