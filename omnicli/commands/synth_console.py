"""What `omni synth` shows of a run: the observer of `omnicli.synth` (notes, the progress bar),
its Ctrl-C / SIGTERM policy, the summary table and the exit code."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from omnicli.commands.common import RequestProgress
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.runtime.console import VERBOSITY, console, err_console, note, status

if TYPE_CHECKING:
    from omnicli.synth import RunPhase, SynthJob, SynthReport
    from omnicli.synth.results import SynthResult, SynthSummary


class SynthConsole(EngineRunInterrupts):
    """The command's observer of a run (`omnicli.synth.SynthObserver`: notes, the progress bar)
    and its Ctrl-C / SIGTERM policy (`EngineRunInterrupts`, shared with `omni bench`).

    Signals arrive on StopSignals' thread, installed when the run starts (its STARTING
    phase). While rows run or the engine closes, the first one stops admitting work (the
    job's stop request) and the run ends with its summary; during engine start-up, and on
    any second signal, `force_exit` ends our processes, writes the summary as it stands and
    exits 130. Closing is graceful too because a terminal's Ctrl-C reaches the native
    engine's vLLM core as well: when the core shuts down first, the run is already closing
    by the time our handler runs, and the one Ctrl-C must still mean "stop", not "force".
    """

    forced_note = "finished utterances are kept"
    graceful_phases = (Phase.RUNNING, Phase.CLOSING)

    def __init__(self, manifest: Path):
        from omnicli.synth import StopRequest

        super().__init__()
        self.manifest = manifest
        self.stop_request = StopRequest()
        self.signal_scope = contextlib.ExitStack()
        self.job: SynthJob | None = None
        self._bar: RequestProgress | None = None

    def attach(self, job: SynthJob) -> None:
        self.job = job
        self.save_lock = job.save_lock  # the job writes summary.json under it; a forced exit waits for it

    # -- signals (watcher thread) ----------------------------------------------------------------
    def on_first_signal(self, sig: signal.Signals) -> None:
        # In any phase: the summary then says interrupted (outside RUNNING a forced exit follows,
        # and an engine start-up it cuts short is no engine error).
        self.stop_request.set()
        super().on_first_signal(sig)

    def request_stop(self, sig: signal.Signals) -> bool:
        if self.job is None:
            return False
        self.stop_request.set()  # (set already) first: the message may not get out (a closed terminal)
        if self.phase == Phase.CLOSING:
            err_console.print(f"\n[yellow]{sig.name}[/yellow]: stopping; the engine is closing (again to force)")
        else:
            err_console.print(f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get "
                              f"{self.job.args.grace_s:g}s to finish (again to force)")
        return True

    def save_partial(self) -> None:
        if self.job is not None:
            self.job.save_partial()

    # -- the observer (main thread) ----------------------------------------------------------------
    def phase_changed(self, phase: RunPhase) -> None:
        self.phase = Phase(phase.value)  # the same four phases: the policy above reads this one
        if self.phase is Phase.STARTING:  # OUT is locked and planned: from now on a signal stops the run
            self.signal_scope.enter_context(self.signals())

    def note(self, message: str) -> None:
        note(message)

    def warning(self, message: str) -> None:
        err_console.print(f"[yellow]note:[/yellow] {message}", highlight=False)

    def skipped(self, error: str) -> None:
        err_console.print(f"[yellow]skipped[/yellow] {error}", highlight=False)

    def waiting(self, message: str) -> contextlib.AbstractContextManager[object]:
        return status(message)

    @contextlib.contextmanager
    def progress(self) -> Iterator[RequestProgress]:
        with RequestProgress(err_console, rate=True) as bar:
            self._bar = bar
            try:
                yield bar
            finally:
                self._bar = None

    def progress_started(self, total: int) -> None:
        if self._bar is not None:
            self._bar.start("synth", total)

    def progress_note(self, message: str) -> None:
        if self._bar is not None and not VERBOSITY.quiet:
            self._bar.note(message)

    def result(self, result: SynthResult) -> None:
        """Advances the bar; notes a failed row or a retention error above it."""
        from omnicli.synth.results import Status

        if self._bar is None:
            return
        failed = result.status is not Status.OK
        if failed:
            where = f"{self.manifest}:{result.line}"
            reason = (result.error or "").removeprefix(f"{where}: ")  # input errors name the row already
            self._bar.note(f"[red]failed[/red] {where} {result.utt}: {reason}")
        if result.retention_error:
            self._bar.note(f"[yellow]retention[/yellow] {result.utt}: {result.retention_error}")
        self._bar.done(failed=failed, audio_seconds=result.audio_seconds)


def print_ending(report: SynthReport) -> None:
    """Prints why the run did not end well (its exit code is `report.exit_code`)."""
    summary = report.summary
    if summary.retention is not None and summary.retention.errors:
        errors = summary.retention.errors
        err_console.print(f"[yellow]retention:[/yellow] {len(errors)} file(s) could not be written: {errors[0]}")
    if report.usage_error:
        err_console.print(f"[red]error:[/red] {escape(report.usage_error)}", highlight=False)
        return
    if summary.output_error:
        err_console.print(f"[red]error:[/red] {summary.output_error}", highlight=False)
        err_console.print(
            f"stopped: {summary.num_pending} utterance(s) left pending (not failed); "
            "free space or fix the folder, then run the same command again to finish them", highlight=False
        )
        return
    if summary.interrupted:
        err_console.print("[yellow]interrupted[/yellow]: finished work is kept; run the same command again to resume")
        return
    if summary.engine_error:
        err_console.print(f"[red]engine error:[/red] {summary.engine_error}")
        if summary.this_run.left_pending:
            err_console.print("unfinished utterances are left pending: run the same command again to resume")


def print_summary(summary: SynthSummary, out: Path) -> None:
    # The heading is a line of its own: a table title wraps at the table's width, cutting OUT's path.
    console.print(Text(f"omni synth -> {out}"), highlight=False)
    table = Table(show_header=False)
    run = summary.this_run
    table.add_row("rows", str(summary.num_rows) + (f" (shard {summary.shard})" if summary.shard else ""))
    table.add_row("ok / failed / pending", f"{summary.num_ok} / {summary.num_failed} / {summary.num_pending}")
    table.add_row("invalid rows", str(summary.num_invalid_rows))
    table.add_row("audio (all ok rows)", f"{summary.audio_seconds:.2f} s")
    table.add_row("this run", f"{run.attempted} attempted in {run.wall_seconds:.2f} s, "
                              f"{run.audio_throughput:.2f} audio-s/s (ok rows)")
    if run.failed_audio_seconds:
        table.add_row("failed rows' audio", f"{run.failed_audio_seconds:.2f} s (not counted above)")
    if summary.retention:
        table.add_row("retained", f"{summary.retention.kept} in {summary.retention.dir}")
    table.add_row("profile", f"{summary.profile_name} ({summary.profile_digest})")
    console.print(table)
    console.print(f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}")
