"""`synthesize(args, observer, stop)`: one `omni synth` run, from the manifest to summary.json.

    report = synthesize(SynthArgs(manifest, out, resolved), observer, stop)

It owns the whole run: the manifest (read, cut by --limit once, then by --shard), the
lock on OUT, the resume plan, the tidy-up of OUT, the engine (started and closed here)
or the Ray actor pool (`omnicli.synth.ray`), the run, and summary.json (a
summary that cannot be written removes the old one). The command only parses, calls
and prints: `observer` hears what happens, `stop` (set from any thread, e.g. a
signal handler's) stops admitting rows. `SynthJob` is the same run as an object, for
a caller that must save a summary from another thread (a forced exit: `save_partial`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from omnicli.driver import STOP_GRACE_S
from omnicli.engine.request import EngineError
from omnicli.errors import EXIT_ENGINE, EXIT_INTERRUPTED, EXIT_OK, EXIT_OUTPUT, EXIT_SOME_FAILED, EXIT_USAGE, UsageError
from omnicli.manifest import Manifest, ManifestRow, read_manifest
from omnicli.runtime.clock import utc_now
from omnicli.runtime.cluster import RayOptions
from omnicli.synth.plan import OutputBusy, OutputLock, SynthPlan, compact_results, plan_run, tidy_out_dir
from omnicli.synth.summary import build_synth_summary, write_summary_or_drop

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile
    from omnicli.retention import Retainer
    from omnicli.synth.results import SynthResult, SynthSummary
    from omnicli.synth.run import RowRun
    from omnicli.synth.shard import ShardSpec

_RAY_TOKEN_HINT = (" (is it running? One with token authentication also needs RAY_AUTH_MODE=token and its token"
                   " here: see docs/scale-out.md)")


class RunPhase(str, Enum):
    """Where a run is (a caller's signal policy depends on it)."""

    STARTING = "starting"  # OUT planned and locked; the engine or the Ray pool is starting
    RUNNING = "running"  # rows are being admitted: `stop` is graceful now
    CLOSING = "closing"  # the engine or the pool is shutting down
    DONE = "done"  # summary.json is being written; the run is over


@dataclass
class SynthArgs:
    """Everything one run needs (the options of `omni synth`), passed whole."""

    manifest: Path
    out: Path
    resolved: ResolvedProfile
    concurrency: int = 8
    limit: int | None = None  # only the first N valid rows (applied once, before --shard)
    shard: ShardSpec | None = None
    retry_failed: bool = False
    max_new_tokens: int | None = None
    keep_failed: Path | None = None  # retained audio (default: $OMNI_FAILED_SPEECH_AUDIO_DIR, else none)
    allow_outside_paths: bool = False
    ray: RayOptions | None = None
    grace_s: float = STOP_GRACE_S  # after a stop, how long requests in flight may finish


class SynthObserver(Protocol):
    """What a run tells its caller, in order: skipped rows and notes, STARTING, a waiting step,
    the progress (started, results, notes above it) between RUNNING and CLOSING, DONE."""

    def phase_changed(self, phase: RunPhase) -> None: ...

    def note(self, message: str) -> None: ...  # a status line (resuming, engine ready, a file written)

    def warning(self, message: str) -> None: ...  # worth reading: other profiles, rows of other shards

    def skipped(self, error: str) -> None: ...  # a manifest row that cannot be read (`file:line: reason`)

    def waiting(self, message: str) -> AbstractContextManager[object]: ...  # a long step (engine start-up)

    def progress(self) -> AbstractContextManager[object]: ...  # around the rows' run

    def progress_started(self, total: int) -> None: ...  # the first engine is ready: `total` rows to go

    def progress_note(self, message: str) -> None: ...  # while the rows run (Ray: an engine ready or died)

    def result(self, result: SynthResult) -> None: ...  # one finished row, already in results.jsonl


class SilentObserver:
    """An observer that hears nothing (a Python caller that only wants the report)."""

    def phase_changed(self, phase: RunPhase) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def skipped(self, error: str) -> None:
        pass

    def waiting(self, message: str) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def progress(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def progress_started(self, total: int) -> None:
        pass

    def progress_note(self, message: str) -> None:
        pass

    def result(self, result: SynthResult) -> None:
        pass


class StopRequest:
    """A stop asked from any thread: no new rows; requests in flight get the grace period.

    The run subscribes its own stop (an asyncio.Event on its loop, or the Ray
    coordinator's threading.Event); a stop set before the run began reaches it at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._listeners: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            if self._set:
                return
            self._set = True
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def is_set(self) -> bool:
        return self._set

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)
            already = self._set
        if already:
            listener()


@dataclass
class SynthReport:
    """What a run ended with: its summary (also in OUT/summary.json when it could be written)."""

    summary: SynthSummary
    usage_error: str | None = None  # --ray: the cluster cannot be reached, is too small, or OUT is not shared
    engine_error: EngineError | None = None  # the start failure or the EngineDead that ended the run

    @property
    def exit_code(self) -> int:
        """What the run's outcome means as an exit code (errors.py; README's table), first reason first."""
        summary = self.summary
        if self.usage_error:
            return EXIT_USAGE
        if summary.output_error:
            return EXIT_OUTPUT
        if summary.interrupted:
            return EXIT_INTERRUPTED
        if summary.engine_error:
            return EXIT_ENGINE
        return EXIT_SOME_FAILED if summary.num_failed or summary.num_invalid_rows else EXIT_OK


class SynthJob:
    """One run as an object: `prepare` (manifest, lock, plan), `execute` (engine or Ray pool,
    rows), `finish` (summary.json, lock released). `run` does all three. `save_lock` is held
    while summary.json is written; `save_partial` writes it from another thread (take
    `save_lock` first), e.g. before a forced exit."""

    def __init__(self, args: SynthArgs, observer: SynthObserver | None = None, stop: StopRequest | None = None):
        self.args = args
        self.observer: SynthObserver = observer or SilentObserver()
        self.stop = stop or StopRequest()
        self.save_lock = threading.Lock()
        self.started_at = utc_now()
        self.manifest: Manifest | None = None  # the rows of this run (after --limit and --shard), once prepared
        self.retainer: Retainer | None = None
        self.redone: set[str] = set()  # utts whose earlier row the plan does not trust (changed, no digest)
        self.run_obj: RowRun | None = None
        self.engine_error: EngineError | None = None  # the start failure or the EngineDead that ended the run
        self.output_error: str | None = None  # OUT could not be written: the run stopped
        self.usage_error: str | None = None
        self._lock: OutputLock | None = None

    def run(self) -> SynthReport:
        plan = self.prepare()
        try:
            self.execute(plan)
            return self.finish()
        finally:
            self.release()

    # -- prepare: the manifest, OUT's lock, the plan ----------------------------------------------
    def prepare(self) -> SynthPlan:
        """Reads the manifest, locks OUT and plans the resume (UsageError: exit 2)."""
        from omnicli.retention import Retainer

        manifest = self._rows()
        self._lock = _lock(self.args.out)
        try:
            self._check_shard_folder()
            plan = self._plan(manifest)
        except BaseException:
            self._lock.release()
            raise
        self.manifest = manifest
        self.redone = set(plan.changed) | set(plan.undigested)
        self.retainer = Retainer.from_option(self.args.keep_failed)
        return plan

    def _rows(self) -> Manifest:
        args = self.args
        parsed = read_manifest(args.manifest, allow_outside_paths=args.allow_outside_paths)
        if not parsed.rows and not parsed.errors:
            jsonl = args.manifest.suffix in (".jsonl", ".json")
            expected = "JSON objects" if jsonl else "utt|prompt_text|prompt_wav|text lines"
            raise EmptyManifest(f"{args.manifest}: no rows (expected {expected})")
        parsed = parsed.limited(args.limit)  # rows (and bad rows) after the --limit cut are not part of this run
        if args.shard is not None:  # after --limit: the N shards together are exactly the rows of one --limit run
            from omnicli.synth.shard import select_shard

            whole, parsed = len(parsed.rows), select_shard(parsed, args.shard)
            self.observer.note(f"shard {args.shard}: {len(parsed.rows)} of {whole} rows")
        for error in parsed.errors:
            self.observer.skipped(str(error))
        return parsed

    def _check_shard_folder(self) -> None:
        """Refuses a folder made with another --shard spec; notes rows of other shards."""
        from omnicli.synth.shard import ShardSpecError, foreign_rows, shard_conflict

        out, shard = self.args.out, self.args.shard
        conflict = shard_conflict(out, shard)
        if conflict:
            raise ShardSpecError(conflict)
        foreign = foreign_rows(out, shard)
        if foreign:
            self.observer.warning(f"{foreign} row(s) in {out / 'results.jsonl'} belong to other shards than {shard}: "
                                  "not counted here, never merged")

    def _plan(self, manifest: Manifest) -> SynthPlan:
        out, resolved = self.args.out, self.args.resolved
        try:
            plan = plan_run(manifest, out, retry_failed=self.args.retry_failed, profile_digest=resolved.digest)
        except OSError as exc:
            raise OutputUnreadable(f"cannot read earlier results in {out}: {exc}") from None
        if plan.done or plan.failed_before or plan.changed or plan.undigested:
            self.observer.note(
                f"resuming in {out}: {len(plan.done)} done, {len(plan.failed_before)} failed earlier"
                f"{' (not retried; use --retry-failed)' if plan.failed_before else ''}, "
                f"{len(plan.changed)} changed in the manifest, "
                + (f"{len(plan.undigested)} without an input digest (cannot tell what they were made from: redone), "
                   if plan.undigested else "")
                + f"{len(plan.todo)} to do"
            )
        if plan.other_profiles:
            self.observer.warning(f"earlier rows in {out} were made with another profile "
                                  f"({', '.join(sorted(plan.other_profiles))}); this run uses {resolved.digest}")
        return plan

    # -- execute: the engine or the Ray pool, the rows ----------------------------------------------
    def execute(self, plan: SynthPlan) -> None:
        """Tidies OUT, runs the planned rows (locally or on Ray), then leaves one results row per utterance."""
        self.observer.phase_changed(RunPhase.STARTING)
        out = self.args.out
        try:
            tidy_out_dir(out)  # even with nothing to do: a torn last line left by a crash is cut off
            if plan.todo:
                try:
                    if self.args.ray is not None:
                        self._run_on_ray(plan.todo, self.args.ray)
                    else:
                        asyncio.run(self._run_local(plan.todo))
                finally:
                    compact_results(out)  # a redone row's new line replaces its earlier one
        except OSError as exc:  # OUT itself cannot be written (disk full, I/O error, removed)
            self.output_error = f"cannot write to {out}: {exc}"

    async def _run_local(self, rows: list[ManifestRow]) -> None:
        from omnicli.engine.backends import start_engine
        from omnicli.synth.run import SynthRun

        args, obs, resolved = self.args, self.observer, self.args.resolved
        loop = asyncio.get_running_loop()
        engine = None
        try:
            with obs.waiting(f"starting engine ({resolved.profile.model}, profile {resolved.name})"):
                try:
                    engine = await start_engine(resolved)
                except EngineError as exc:
                    self.engine_error = exc
                    return
            obs.note(f"engine ready in {engine.startup_seconds:.1f}s ({engine.model_name}, {engine.device}, "
                     f"profile {resolved.name} {resolved.digest})")
            for path in engine.write_run_files(args.out):
                obs.note(f"wrote {path}")
            with obs.progress():
                obs.progress_started(len(rows))
                run = SynthRun(engine, args.out, resolved=resolved, concurrency=args.concurrency,
                               max_new_tokens=args.max_new_tokens, retainer=self.retainer, on_result=obs.result,
                               grace_s=args.grace_s)
                self.run_obj = run

                def stop_on_loop() -> None:
                    with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                        loop.call_soon_threadsafe(run.stop.set)

                self.stop.subscribe(stop_on_loop)
                obs.phase_changed(RunPhase.RUNNING)
                await run.run(rows)
            self.engine_error = run.engine_error
        finally:
            obs.phase_changed(RunPhase.CLOSING)
            if engine is not None:
                await engine.close()

    def _run_on_ray(self, rows: list[ManifestRow], ray: RayOptions) -> None:
        """The same run with the engines in Ray actors; joining or starting Ray is the start-up.
        Leaving shuts down a cluster we started, never one we joined."""
        from omnicli.runtime.cluster import RayCluster, RayUnavailable
        from omnicli.synth.ray import RaySynthRun, keeping_signal_handlers, unreachable_head

        args, obs, resolved = self.args, self.observer, self.args.resolved
        self.usage_error = unreachable_head(ray.address)
        if self.usage_error:
            return
        cluster = RayCluster(ray.address, ray.resources, quiet=ray.quiet)
        try:
            joining = f"joining the Ray cluster at {ray.address}" if ray.address else "starting a local Ray cluster"
            with obs.waiting(joining):
                try:
                    with keeping_signal_handlers():  # the caller's: Ctrl-C and SIGTERM stop the run gracefully
                        cluster.open()
                    cluster.check_fits()
                except RayUnavailable as exc:  # Ray 2.60's clusters ask for a token by default
                    self.usage_error = str(exc) + (_RAY_TOKEN_HINT if ray.address else "")
                    return
            r = ray.resources
            obs.note(f"Ray: {r.engines} engine(s) x {r.cpus_per_engine:g} CPU, {r.gpus_per_engine:g} GPU "
                     f"({resolved.profile.model}, {resolved.platform}, profile {resolved.name} {resolved.digest})")
            with obs.progress():
                # The bar starts with the first engine, as a local run's does (its rate counts from there).
                run = RaySynthRun(
                    cluster, args.out, resolved=resolved, concurrency=args.concurrency,
                    max_new_tokens=args.max_new_tokens, retainer=self.retainer, on_result=obs.result,
                    on_note=obs.progress_note,
                    on_first_ready=lambda: obs.progress_started(len(rows)), grace_s=args.grace_s,
                )
                self.run_obj = run
                self.stop.subscribe(run.stop.set)  # a threading.Event: safe from any thread
                obs.phase_changed(RunPhase.RUNNING)
                run.run(rows)
            self.engine_error = run.engine_error
            self.usage_error = run.storage_error
        finally:
            obs.phase_changed(RunPhase.CLOSING)
            cluster.close()

    # -- finish: summary.json ---------------------------------------------------------------------
    def finish(self) -> SynthReport:
        """Writes summary.json (under `save_lock`)."""
        self.observer.phase_changed(RunPhase.DONE)
        with self.save_lock:
            summary = self._write_summary(interrupted=self.stop.is_set())
        return SynthReport(summary, self.usage_error, None if summary.interrupted else self.engine_error)

    def release(self) -> None:
        """Releases OUT's lock (taken by `prepare`)."""
        if self._lock is not None:
            self._lock.release()

    def save_partial(self) -> None:
        """summary.json as things stand, for a forced exit (hold `save_lock`); nothing before `prepare`."""
        if self.manifest is not None:
            self._write_summary(interrupted=True)

    def _write_summary(self, *, interrupted: bool) -> SynthSummary:
        assert self.manifest is not None, "prepare() first"
        run = self.run_obj
        if run is not None and self.output_error is None:
            self.output_error = run.output_error
        summary = build_synth_summary(
            self.manifest, self.args.out, run, resolved=self.args.resolved, limit=self.args.limit,
            interrupted=interrupted, engine_error=self.engine_error, output_error=self.output_error,
            retainer=self.retainer, started_at=self.started_at, shard=str(self.args.shard) if self.args.shard else None,
            redone=self.redone,
        )
        unwritten = write_summary_or_drop(self.args.out, summary)
        if unwritten is not None:
            self.output_error = self.output_error or unwritten
            summary.output_error = self.output_error
        return summary


def synthesize(args: SynthArgs, observer: SynthObserver | None = None, stop: StopRequest | None = None) -> SynthReport:
    """Runs `args` into `args.out` (see the module doc); UsageError (exit 2) before any work on bad input."""
    return SynthJob(args, observer, stop).run()


class EmptyManifest(UsageError, ValueError):
    """The manifest holds no row at all (not even a bad one)."""


class OutputUnreadable(UsageError, OSError):
    """OUT's earlier results (or OUT itself) cannot be read."""


def _lock(out: Path) -> OutputLock:
    try:
        return OutputLock(out)
    except OutputBusy:
        raise
    except OSError as exc:
        raise OutputUnreadable(str(exc)) from None
