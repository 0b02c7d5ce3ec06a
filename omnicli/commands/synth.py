"""`omni synth MANIFEST`: synthesize every row to OUT/<utt>.wav."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT_IO,
    EXIT_SOME_FAILED,
    EXIT_USAGE,
    VERBOSITY,
    ProfileOption,
    QuietOption,
    RequestProgress,
    SetOption,
    VerboseOption,
    console,
    err_console,
    note,
    require_folder,
    resolve_profile,
    set_verbosity,
    status,
)
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.commands.report import ReportOption, check_report_option, report_after_run
from omnicli.scaleout.shard import ShardSpec, ShardSpecError

if TYPE_CHECKING:
    from omnicli.synth_results import SynthSummary


def _parse_shard(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except ShardSpecError as exc:
        raise typer.BadParameter(str(exc)) from None


def _check_shard_folder(out: Path, shard: ShardSpec | None, lock) -> None:
    """Refuses a folder made with another --shard spec (exit 2); notes rows of other shards."""
    from omnicli.scaleout.shard import foreign_rows, shard_conflict

    conflict = shard_conflict(out, shard)
    if conflict:
        lock.release()
        err_console.print(f"[red]error:[/red] {conflict}", highlight=False)
        raise typer.Exit(EXIT_USAGE)
    foreign = foreign_rows(out, shard)
    if foreign:
        err_console.print(f"[yellow]note:[/yellow] {foreign} row(s) in {out / 'results.jsonl'} belong to other shards than {shard}: not counted here, never merged", highlight=False)


def synth(
    manifest: Annotated[
        Optional[Path],
        typer.Argument(metavar="MANIFEST", help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav]) or JSONL (utt, text, ref_audio, ref_text).", show_default=False),
    ] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Synthesize the demo set shipped in the package (no MANIFEST needed).")] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: <utt>.wav, results.jsonl, summary.json.")] = Path("out"),
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight at once.")] = 8,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=0, help="Only the first N valid rows of the manifest.")] = None,
    shard: Annotated[Optional[ShardSpec], typer.Option("--shard", metavar="I/N", parser=_parse_shard, help="Only shard I of N (I from 0; rows by a hash of the utt), into an --out of its own; combine with `omni synth-merge`. After --limit.", show_default=False)] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Also redo utterances that failed in an earlier run into the same --out.")] = False,
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", min=1, help="Cap on talker tokens per utterance (default: the profile's talker.max_new_tokens).")] = None,
    keep_failed: Annotated[Optional[Path], typer.Option("--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR", help="Retain failed/suspect audio + metadata here. Thresholds: --set retention.KEY=VALUE.")] = None,
    allow_outside_paths: Annotated[bool, typer.Option("--allow-outside-paths", help="Allow absolute reference paths and paths outside the manifest's folder.")] = False,
    ray: Annotated[bool, typer.Option("--ray", help="Run the rows on a Ray actor pool, one engine per actor (needs omnicli\\[ray]; see docs/scale-out.md).")] = False,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", metavar="auto|HOST:PORT", help="With --ray: join this running cluster instead of starting a local one.")] = None,
    engines: Annotated[int, typer.Option("--engines", min=1, help="With --ray: engine actors, one engine each.")] = 1,
    gpus_per_engine: Annotated[float, typer.Option("--gpus-per-engine", min=0, help="With --ray: GPUs each engine reserves (above 0: the profile is resolved for cuda).")] = 0.0,
    cpus_per_engine: Annotated[float, typer.Option("--cpus-per-engine", min=0, help="With --ray: CPUs each engine reserves.")] = 1.0,
    report_file: ReportOption = None,
    profile: ProfileOption = None,
    set_: SetOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Synthesize every line of a manifest to OUT/<utt>.wav.

    Resumable: run it again with the same --out and finished utterances are
    skipped (--retry-failed redoes failed ones). A bad row is reported
    (file:line: reason) and skipped; the rest of the batch goes on. Ctrl-C,
    SIGTERM or SIGHUP stops admitting rows, lets requests in flight finish for a few
    seconds, writes the summary and shuts the engine down; a second Ctrl-C
    exits at once. Exit code: 0 all rows ok, 1 some rows failed or were
    invalid, 2 bad usage or input, 3 the engine failed, 4 the output folder
    could not be written (disk full: unfinished rows stay pending), 130
    interrupted. With --ray the same holds; the rows run on Ray actors that
    write into --out, which must be storage every node shares.
    """
    from omnicli.manifest import read_manifest
    from omnicli.retention import Retainer
    from omnicli.synthesis import OutputBusy, OutputLock, plan_run, tidy_out_dir

    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    if (manifest is None) == (not demo):
        err_console.print("[red]error:[/red] give a MANIFEST or --demo (exactly one)")
        raise typer.Exit(EXIT_USAGE)
    if demo:
        from omnicli.datasets import demo_manifest_path

        manifest = demo_manifest_path()
    resources = _ray_resources(ray, ray_address, engines, gpus_per_engine, cpus_per_engine)
    # With --ray the engines run in actors: a GPU actor resolves for cuda, a CPU-only one for
    # cpu, whatever the coordinator's own machine has.
    resolved = resolve_profile(profile, set_, platform=(("cuda" if gpus_per_engine > 0 else "cpu") if ray else None))
    if ray and resolved.platform == "cuda" and gpus_per_engine <= 0:
        err_console.print(f"[red]error:[/red] profile {resolved.name} runs on cuda: give each engine a GPU (--gpus-per-engine 1)")
        raise typer.Exit(EXIT_USAGE)
    require_folder(out, "--out")
    parsed = read_manifest(manifest, allow_outside_paths=allow_outside_paths)  # ManifestError: exit 2 (omnicli.cli)
    if not parsed.rows and not parsed.errors:
        err_console.print(f"[red]error:[/red] {manifest}: no rows (expected {'JSON objects' if manifest.suffix in ('.jsonl', '.json') else 'utt|prompt_text|prompt_wav|text lines'})")
        raise typer.Exit(EXIT_USAGE)
    parsed = parsed.limited(limit)  # rows (and bad rows) after the --limit cut are not part of this run
    if shard is not None:  # after --limit: the N shards together are exactly the rows of one --limit run
        from omnicli.scaleout.shard import select_shard

        whole, parsed = len(parsed.rows), select_shard(parsed, shard)
        note(f"shard {shard}: {len(parsed.rows)} of {whole} rows")
    for error in parsed.errors:
        err_console.print(f"[yellow]skipped[/yellow] {error}", highlight=False)
    try:
        lock = OutputLock(out)
    except (OutputBusy, OSError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    _check_shard_folder(out, shard, lock)
    try:
        plan = plan_run(parsed, out, limit=limit, retry_failed=retry_failed, profile_digest=resolved.digest)
    except OSError as exc:
        lock.release()
        err_console.print(f"[red]error:[/red] cannot read earlier results in {out}: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    if plan.done or plan.failed_before or plan.changed or plan.undigested:
        note(
            f"resuming in {out}: {len(plan.done)} done, {len(plan.failed_before)} failed earlier"
            f"{' (not retried; use --retry-failed)' if plan.failed_before else ''}, "
            f"{len(plan.changed)} changed in the manifest, "
            + (f"{len(plan.undigested)} without an input digest (cannot tell what they were made from: redone), " if plan.undigested else "")
            + f"{len(plan.todo)} to do"
        )
    if plan.other_profiles:
        err_console.print(f"[yellow]note:[/yellow] earlier rows in {out} were made with another profile ({', '.join(sorted(plan.other_profiles))}); this run uses {resolved.digest}")
    retainer = Retainer.from_option(keep_failed)
    session = _RaySession(parsed, out, resolved, limit, retainer, ray_address, resources) if resources else _Session(parsed, out, resolved, limit, retainer)
    with lock, session.signals():
        session.shard = str(shard) if shard else None  # recorded in summary.json
        try:
            tidy_out_dir(out)  # even with nothing to do: a torn last line left by a crash is cut off
            if isinstance(session, _RaySession):
                session.run_on_ray(plan.todo, concurrency, max_new_tokens)
            else:
                asyncio.run(session.run(plan.todo, concurrency, max_new_tokens))
        except OSError as exc:  # OUT itself cannot be written (disk full, I/O error, removed)
            session.output_error = f"cannot write to {out}: {exc}"
        session.phase = Phase.DONE
        summary = session.write_summary()
    _print_summary(summary, out)
    report_after_run(report_file, [out, *([keep_failed] if keep_failed else [])])
    if retainer is not None and retainer.errors:
        err_console.print(f"[yellow]retention:[/yellow] {retainer.errors} file(s) could not be written: {retainer.error_messages[0]}")
    if getattr(session, "usage_error", None):
        err_console.print(f"[red]error:[/red] {escape(session.usage_error)}", highlight=False)
        raise typer.Exit(EXIT_USAGE)
    if session.output_error:
        err_console.print(f"[red]error:[/red] {session.output_error}", highlight=False)
        err_console.print(
            f"stopped: {summary.num_pending} utterance(s) left pending (not failed); "
            "free space or fix the folder, then run the same command again to finish them", highlight=False
        )
        raise typer.Exit(EXIT_OUTPUT_IO)
    if session.interrupted:
        err_console.print("[yellow]interrupted[/yellow]: finished work is kept; run the same command again to resume")
        raise typer.Exit(EXIT_INTERRUPTED)
    if session.engine_error:
        err_console.print(f"[red]engine error:[/red] {session.engine_error}")
        if summary.this_run.left_pending:
            err_console.print("unfinished utterances are left pending: run the same command again to resume")
        raise typer.Exit(EXIT_ENGINE)
    failed = summary.num_failed or summary.num_invalid_rows
    raise typer.Exit(EXIT_SOME_FAILED if failed else EXIT_OK)


class _Session(EngineRunInterrupts):
    """One `omni synth` invocation: engine life cycle, progress and signals.

    Signals arrive on StopSignals' thread. While requests run, the first one
    stops admitting work (SynthRun.stop); during engine start-up or shutdown,
    and on any second signal, `force_exit` ends our processes and exits
    (the policy is `EngineRunInterrupts`, shared with `omni bench`).
    """

    forced_note = "finished utterances are kept"

    def __init__(self, manifest, out: Path, resolved, limit, retainer):
        super().__init__()  # phase: starting -> running -> closing -> done
        self.manifest = manifest
        self.out = out
        self.resolved = resolved
        self.limit = limit
        self.retainer = retainer
        self.shard: str | None = None  # --shard "I/N", recorded in summary.json
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.engine_error: str | None = None
        self.output_error: str | None = None  # OUT could not be written: the run stopped
        self.run_obj = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- signals (watcher thread) ------------------------------------------------
    def request_stop(self, sig) -> bool:
        if self._loop is None or self.run_obj is None:
            return False
        self._loop.call_soon_threadsafe(self.run_obj.stop.set)  # first: the message may not get out (a closed terminal)
        err_console.print(f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.run_obj.grace_s:g}s to finish (again to force)")
        return True

    def save_partial(self) -> None:
        self.write_summary(locked=True)

    # -- the run (event loop) --------------------------------------------------------
    async def run(self, rows, concurrency: int, max_new_tokens: int | None) -> None:
        """Starts the engine, runs the batch under a progress bar, always closes the engine."""
        from omnicli.engine import EngineError
        from omnicli.engine.backends import start_engine
        from omnicli.synthesis import SynthRun

        if not rows:
            return
        self._loop = asyncio.get_running_loop()
        engine = None
        try:
            with status(f"starting engine ({self.resolved.profile.model}, profile {self.resolved.name})"):
                try:
                    engine = await start_engine(self.resolved)
                except EngineError as exc:
                    self.engine_error = str(exc)
                    return
            note(f"engine ready in {engine.startup_seconds:.1f}s ({engine.model_name}, {engine.device}, profile {self.resolved.name} {self.resolved.digest})")
            for path in engine.write_run_files(self.out):
                note(f"wrote {path}")
            with RequestProgress(err_console, rate=True) as progress:
                progress.start("synth", len(rows))
                on_result = self.progress_feed(progress)
                self.run_obj = SynthRun(engine, self.out, resolved=self.resolved, concurrency=concurrency, max_new_tokens=max_new_tokens, retainer=self.retainer, on_result=on_result)
                self.phase = Phase.RUNNING
                if self.interrupted:  # a signal raced with start-up
                    self.run_obj.stop.set()
                await self.run_obj.run(rows)
            self.engine_error = self.run_obj.engine_error
        finally:
            self.phase = Phase.CLOSING
            if engine is not None:
                await engine.close()

    def progress_feed(self, progress: RequestProgress):
        """The per-row callback: advances the bar, notes a failed row or a retention error above it."""

        def on_result(result) -> None:
            if result.status != "ok":
                where = f"{self.manifest.path}:{result.line}"
                reason = (result.error or "").removeprefix(f"{where}: ")  # input errors name the row already
                progress.note(f"[red]failed[/red] {where} {result.utt}: {reason}")
            if result.retention_error:
                progress.note(f"[yellow]retention[/yellow] {result.utt}: {result.retention_error}")
            progress.done(failed=result.status != "ok", audio_seconds=result.audio_seconds)

        return on_result

    def write_summary(self, locked: bool = False) -> SynthSummary:
        from omnicli.synthesis import SUMMARY, build_synth_summary, write_summary

        if not locked:
            with self.save_lock:
                return self.write_summary(locked=True)
        if self.run_obj is not None and self.output_error is None:
            self.output_error = getattr(self.run_obj, "output_error", None)
        summary = build_synth_summary(
            self.manifest,
            self.out,
            self.run_obj,
            resolved=self.resolved,
            limit=self.limit,
            interrupted=self.interrupted,
            engine_error=self.engine_error,
            output_error=self.output_error,
            retainer=self.retainer,
            started_at=self.started_at,
            shard=self.shard,
        )
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            write_summary(self.out, summary)
        except OSError as exc:
            # An old summary.json would contradict results.jsonl: better none (a re-run rebuilds it).
            with contextlib.suppress(OSError):
                (self.out / SUMMARY).unlink(missing_ok=True)
            self.output_error = self.output_error or f"cannot write to {self.out}: {exc}"
            summary.output_error = self.output_error
        return summary


class _RaySession(_Session):
    """`omni synth --ray`: the same life cycle, with the engines in Ray actors
    (`omnicli.scaleout.ray_synth`). Joining or starting Ray is the start-up
    phase; leaving shuts down a cluster we started, never one we joined."""

    def __init__(self, manifest, out: Path, resolved, limit, retainer, address: str | None, resources):
        super().__init__(manifest, out, resolved, limit, retainer)
        self.address = address
        self.resources = resources
        self.usage_error: str | None = None  # Ray cannot be reached, too small, or OUT not shared: exit 2

    def request_stop(self, sig) -> bool:
        if self.run_obj is None:
            return False
        self.run_obj.stop.set()  # a threading.Event: safe from the signal thread
        err_console.print(f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.run_obj.grace_s:g}s to finish (again to force)")
        return True

    def run_on_ray(self, rows, concurrency: int, max_new_tokens: int | None) -> None:
        from omnicli.scaleout.cluster import RayCluster, RayUnavailable
        from omnicli.scaleout.ray_synth import RaySynthRun, keeping_signal_handlers, unreachable_head

        if not rows:
            return
        self.usage_error = unreachable_head(self.address)
        if self.usage_error:
            return
        cluster = RayCluster(self.address, self.resources, quiet=not VERBOSITY.verbose)
        try:
            with status(f"joining the Ray cluster at {self.address}" if self.address else "starting a local Ray cluster"):
                try:
                    with keeping_signal_handlers():  # ours: Ctrl-C and SIGTERM stop the run gracefully
                        cluster.open()
                    cluster.check_fits()
                except RayUnavailable as exc:
                    self.usage_error = str(exc)
                    if self.address:  # Ray 2.60's clusters ask for a token by default
                        self.usage_error += " (is it running? One with token authentication also needs RAY_AUTH_MODE=token and its token here: see docs/scale-out.md)"
                    return
            r = self.resources
            note(f"Ray: {r.engines} engine(s) x {r.cpus_per_engine:g} CPU, {r.gpus_per_engine:g} GPU "
                 f"({self.resolved.profile.model}, {self.resolved.platform}, profile {self.resolved.name} {self.resolved.digest})")
            with RequestProgress(err_console, rate=True) as progress:
                # The bar starts with the first engine, as a local run's does (its rate counts from there).
                self.run_obj = RaySynthRun(
                    cluster, self.out, resolved=self.resolved, concurrency=concurrency, max_new_tokens=max_new_tokens,
                    retainer=self.retainer, on_result=self.progress_feed(progress), on_note=lambda m: None if VERBOSITY.quiet else progress.note(m),
                    on_first_ready=lambda: progress.start("synth", len(rows)),
                )
                self.phase = Phase.RUNNING
                if self.interrupted:  # a signal raced with start-up
                    self.run_obj.stop.set()
                self.run_obj.run(rows)
            self.engine_error = self.run_obj.engine_error
            self.usage_error = self.run_obj.storage_error
        finally:
            self.phase = Phase.CLOSING
            cluster.close()


def _ray_resources(ray: bool, address: str | None, engines: int, gpus: float, cpus: float):
    """EngineResources for --ray (exit 2 with the install hint when Ray is missing); None without it."""
    from omnicli.scaleout.cluster import EngineResources, import_ray

    if not ray:
        if address is not None or engines != 1 or gpus != 0 or cpus != 1:
            err_console.print("[red]error:[/red] --ray-address, --engines, --gpus-per-engine and --cpus-per-engine need --ray")
            raise typer.Exit(EXIT_USAGE)
        return None
    import_ray()  # RayUnavailable (exit 2, with the install hint)
    return EngineResources(engines=engines, gpus_per_engine=gpus, cpus_per_engine=cpus)


def _print_summary(summary: SynthSummary, out: Path) -> None:
    # The heading is a line of its own: a table title wraps at the table's width, cutting OUT's path.
    console.print(Text(f"omni synth -> {out}"), highlight=False)
    table = Table(show_header=False)
    run = summary.this_run
    table.add_row("rows", str(summary.num_rows) + (f" (shard {summary.shard})" if summary.shard else ""))
    table.add_row("ok / failed / pending", f"{summary.num_ok} / {summary.num_failed} / {summary.num_pending}")
    table.add_row("invalid rows", str(summary.num_invalid_rows))
    table.add_row("audio (all ok rows)", f"{summary.audio_seconds:.2f} s")
    table.add_row("this run", f"{run.attempted} attempted in {run.wall_seconds:.2f} s, {run.audio_throughput:.2f} audio-s/s")
    if summary.retention:
        table.add_row("retained", f"{summary.retention.kept} in {summary.retention.dir}")
    table.add_row("profile", f"{summary.profile_name} ({summary.profile_digest})")
    console.print(table)
    console.print(f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}")
