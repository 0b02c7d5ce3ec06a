"""`omni eval-wer`: Seed-TTS-eval compatible WER of generated speech (parse, run, print).

The work lives in `omnicli.evaluation`; this module checks options, shows a
progress bar, prints the summary table and writes the result files.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
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
)

app = typer.Typer(help="Seed-TTS-eval compatible WER of generated speech.")


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def _usage_error(message: str) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(EXIT_USAGE)


def _load_rows(manifest: Path):
    from omnicli.manifest import ManifestError, read_manifest

    try:
        # Prompt audio is not needed to score, so paths outside the manifest folder are fine.
        parsed = read_manifest(manifest, allow_outside_paths=True, check_audio=False, short_layouts=True)
    except ManifestError as exc:
        raise _usage_error(str(exc)) from None
    if parsed.errors:
        for error in parsed.errors[:20]:
            err_console.print(f"[red]manifest error:[/red] {error}")
        if len(parsed.errors) > 20:
            err_console.print(f"... and {len(parsed.errors) - 20} more")
        raise _usage_error(f"{manifest}: {len(parsed.errors)} bad row(s); fix them to evaluate every utterance")
    if not parsed.rows:
        raise _usage_error(f"{manifest}: no utterances")
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
    if problems:
        listing = Table(title="not scored", title_justify="left")
        for column in ("utt", "status", "detail"):
            listing.add_column(column)
        for utt, state, detail in problems[:20]:
            listing.add_row(utt, state, detail)
        if len(problems) > 20:
            listing.add_row("...", f"{len(problems) - 20} more", "see the results files")
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
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Transcribe GEN_DIR/<utt>.wav for every manifest row and report Seed-TTS-eval WER.

    Exit codes: 0 every utterance scored, 1 some missing or failed, 2 bad usage
    or input (including an ASR model that is not on this machine), 3 the ASR
    model failed to load, 130 interrupted.
    """
    from omnicli.evaluation import (
        AsrError,
        AsrSetupError,
        AsrSpec,
        TranscriptsError,
        build_summary,
        default_spec,
        evaluate,
        load_backend,
        read_transcripts,
        write_results,
    )
    from omnicli.retention import Retainer

    set_verbosity(quiet, verbose)
    resolved = resolve_profile(profile, sets)
    settings = resolved.profile
    threshold = settings.retention.asr_wer_threshold if threshold is None else threshold
    device_name = (device.value if device else None) or settings.device
    lang_code = lang.value

    rows = _load_rows(manifest)
    if transcripts is None and not gen_dir.is_dir():
        raise _usage_error(f"{gen_dir}: generated-audio folder not found")
    out_dir = out or gen_dir / "eval_wer"
    require_folder(out_dir, "--out")
    retainer = Retainer.from_option(keep_failed)

    backend = cached = None
    if transcripts is not None:
        if asr is not None:
            err_console.print("[yellow]warning:[/yellow] --asr is ignored with --transcripts (no ASR runs)")
        try:
            cached = read_transcripts(transcripts)
        except TranscriptsError as exc:
            raise _usage_error(str(exc)) from None
        asr_info = {"backend": "transcripts", "model": str(transcripts), "language": lang_code}
    else:
        try:
            spec = AsrSpec.parse(asr) if asr else default_spec(lang_code)
            with status(f"loading ASR {spec} ..."):
                backend = load_backend(spec, lang=lang_code, device=device_name, max_new_tokens=max_new_tokens)
        except AsrSetupError as exc:
            raise _usage_error(str(exc)) from None
        except AsrError as exc:
            err_console.print(f"[red]ASR failed to load:[/red] {exc}")
            raise typer.Exit(EXIT_ENGINE) from None
        asr_info = {"requested": str(spec), **backend.describe()}

    retention_meta = {"profile_digest": resolved.digest, "asr_backend": asr_info["backend"], "asr_model": asr_info["model"]}
    try:
        with progress_bar(err_console, failed_label="failed/missing") as progress:
            task = progress.add_task("scoring" if cached is not None else "transcribing", total=len(rows), failed=0)
            not_scored = 0

            def advance(result) -> None:
                nonlocal not_scored
                not_scored += 0 if result.scored else 1
                progress.update(task, advance=1, failed=not_scored)

            run = evaluate(
                rows, gen_dir, lang=lang_code, backend=backend, transcripts=cached, threshold=threshold,
                batch_size=batch_size, retainer=retainer, retention_meta=retention_meta, on_result=advance,
            )
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]: no results written")
        raise typer.Exit(EXIT_INTERRUPTED) from None

    summary = build_summary(
        run, lang=lang_code, threshold=threshold, asr=asr_info, manifest=manifest, gen_dir=gen_dir,
        transcripts_file=transcripts, profile_name=resolved.name, profile_digest=resolved.digest, retainer=retainer,
    )
    try:
        paths = write_results(out_dir, run.results, summary)
    except OSError as exc:
        print_summary(summary)
        raise _usage_error(f"cannot write results to {out_dir}: {exc}") from None
    print_summary(summary)
    if retainer is not None and retainer.errors:
        err_console.print(f"[yellow]warning:[/yellow] {retainer.errors} retained file(s) could not be written: {retainer.error_messages[0]}")
    err_console.print(f"results: {paths['tsv']}, {paths['jsonl']}; summary: {paths['summary']}; seed-tts-eval: {paths['seed_wer']}")
    raise typer.Exit(EXIT_OK if summary["num_missing"] == 0 and summary["num_failed"] == 0 else EXIT_SOME_FAILED)


app.command("eval-wer", no_args_is_help=True)(eval_wer)
