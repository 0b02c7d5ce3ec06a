"""`omni synth MANIFEST`: synthesize every row to OUT/<utt>.wav."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    ProfileOption,
    SetOption,
    console,
    err_console,
    resolve_profile,
)


def synth(
    manifest: Annotated[Path, typer.Argument(help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav]) or JSONL (utt, text, ref_audio, ref_text).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: <utt>.wav, results.jsonl, summary.json.")] = Path("out"),
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight at once.")] = 8,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=0, help="Only the first N rows of the manifest.")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Also redo utterances that failed in an earlier run into the same --out.")] = False,
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", min=1, help="Cap on talker tokens per utterance (default: the profile's talker.max_new_tokens).")] = None,
    keep_failed: Annotated[Optional[Path], typer.Option("--keep-failed", help="Retain failed/suspect audio + metadata here (or set OMNI_FAILED_SPEECH_AUDIO_DIR).")] = None,
    allow_outside_paths: Annotated[bool, typer.Option("--allow-outside-paths", help="Allow reference audio outside the manifest's folder.")] = False,
    profile: ProfileOption = None,
    set_: SetOption = None,
) -> None:
    """Synthesize every line of a manifest to OUT/<utt>.wav.

    Resumable: run it again with the same --out and finished utterances are
    skipped. A bad row is reported (file:line: reason) and skipped; the rest of
    the batch goes on. Exit code: 0 all rows ok, 1 some rows failed or were
    invalid, 2 bad usage, 3 the engine failed, 130 interrupted.
    """
    from omnicli.manifest import ManifestError, read_manifest
    from omnicli.retention import Retainer
    from omnicli.synthesis import build_summary, plan_run, write_summary

    resolved = resolve_profile(profile, set_)
    try:
        parsed = read_manifest(manifest, allow_outside_paths=allow_outside_paths)
    except ManifestError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    for error in parsed.errors:
        err_console.print(f"[yellow]skipped[/yellow] {error}")
    plan = plan_run(parsed, out, limit=limit, retry_failed=retry_failed)
    if plan.done or plan.failed_before:
        console.print(f"resuming in {out}: {len(plan.done)} done, {len(plan.failed_before)} failed earlier (not retried; --retry-failed), {len(plan.todo)} to do")
    retainer = Retainer.from_option(keep_failed)
    outcome = asyncio.run(_run(resolved, plan.todo, out, concurrency, max_new_tokens, retainer))
    run, interrupted, engine_error = outcome
    from datetime import datetime, timezone

    summary = build_summary(parsed, out, run, resolved=resolved, limit=limit, interrupted=interrupted, started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    out.mkdir(parents=True, exist_ok=True)
    write_summary(out, summary)
    _print_summary(summary, out)
    if retainer is not None and retainer.errors:
        err_console.print(f"[yellow]retention:[/yellow] {retainer.errors} file(s) could not be written: {retainer.error_messages[0]}")
    if engine_error:
        err_console.print(f"[red]engine error:[/red] {engine_error}")
        raise typer.Exit(EXIT_ENGINE)
    if interrupted:
        err_console.print("[yellow]interrupted[/yellow]: finished work is kept; run the same command again to resume")
        raise typer.Exit(EXIT_INTERRUPTED)
    failed = summary["num_failed"] or summary["num_invalid_rows"]
    raise typer.Exit(EXIT_SOME_FAILED if failed else EXIT_OK)


async def _run(resolved, rows, out, concurrency, max_new_tokens, retainer):
    """Starts the engine, runs the batch under a progress bar, always closes the engine."""
    from omnicli.engine import Engine, EngineError
    from omnicli.synthesis import SynthRun

    if not rows:
        return None, False, None
    loop = asyncio.get_running_loop()
    interrupted = False
    run: SynthRun | None = None

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        if run is not None:
            run.stop.set()
        else:
            main_task.cancel()

    main_task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    engine = None
    try:
        with console.status(f"starting engine ({resolved.profile.model}, profile {resolved.name})"):
            try:
                engine = await Engine.start(resolved)
            except EngineError as exc:
                return None, interrupted, str(exc)
        console.print(f"engine ready in {engine.startup_seconds:.1f}s ({engine.model_name}, {engine.device}, profile {resolved.name} {resolved.digest})")
        with _progress() as progress:
            task = progress.add_task("synth", total=len(rows), failed=0, rate=0.0)
            totals = {"audio": 0.0, "failed": 0}

            def on_result(result) -> None:
                totals["audio"] += result.audio_seconds
                totals["failed"] += result.status != "ok"
                if result.status != "ok":
                    progress.console.print(f"[red]failed[/red] {result.utt} (line {result.line}): {result.error}")
                elapsed = progress.tasks[0].elapsed or 1e-9
                progress.update(task, advance=1, failed=totals["failed"], rate=totals["audio"] / elapsed)

            run = SynthRun(engine, out, concurrency=concurrency, max_new_tokens=max_new_tokens, retainer=retainer, on_result=on_result)
            await run.run(rows)
        return run, interrupted, None
    except asyncio.CancelledError:
        return run, True, None
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if engine is not None:
            await engine.close()


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TextColumn("{task.fields[rate]:.2f} audio-s/s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


def _print_summary(summary: dict, out: Path) -> None:
    table = Table(title=f"omni synth -> {out}", show_header=False)
    run = summary["this_run"]
    table.add_row("rows", str(summary["num_rows"]))
    table.add_row("ok / failed / pending", f"{summary['num_ok']} / {summary['num_failed']} / {summary['num_pending']}")
    table.add_row("invalid rows", str(summary["num_invalid_rows"]))
    table.add_row("audio (all ok rows)", f"{summary['audio_seconds']:.2f} s")
    table.add_row("this run", f"{run['attempted']} attempted in {run['wall_seconds']:.2f} s, {run['audio_throughput']:.2f} audio-s/s")
    table.add_row("profile", f"{summary['profile_name']} ({summary['profile_digest']})")
    console.print(table)
    console.print(f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}")
