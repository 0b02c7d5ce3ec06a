"""The Ctrl-C / SIGTERM / SIGHUP policy shared by the commands that run the engine."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from enum import Enum
from typing import TYPE_CHECKING

import psutil

from omnicli.errors import EXIT_INTERRUPTED
from omnicli.runtime.console import err_console
from omnicli.runtime.orphans import terminate_children
from omnicli.runtime.run_folder import remove_live
from omnicli.runtime.signals import StopSignals

if TYPE_CHECKING:
    from omnicli.benchmark.entrypoint import BenchStop
    from omnicli.commands.common import RequestProgress


class Phase(str, Enum):
    """Where a command that runs the engine is; decides what a signal does."""

    STARTING = "starting"  # engine start-up: the main thread may sit in native code for a long time
    RUNNING = "running"
    CLOSING = "closing"
    SCORING = "scoring"  # `bench --eval` scoring the passes' audio: a signal writes the results, exits 130
    DONE = "done"  # results written; the normal exit is moments away


class EngineRunInterrupts:
    """The Ctrl-C / SIGTERM policy of a command that runs the engine (synth, bench).

    `phase` is a `Phase`. The first signal in one of
    `graceful_phases` calls `request_stop`, which must be thread-safe and
    return False when there is nothing to stop yet. In any other phase but
    DONE, and for every later signal, `force_exit` ends our child processes
    (the engine's), calls `save_partial` holding `save_lock` and exits 130.
    Commands subclass it and write their own results under `save_lock` too.
    """

    graceful_phases: tuple[Phase, ...] = (Phase.RUNNING,)
    forced_note = "finished work is kept"

    def __init__(self) -> None:
        self.phase = Phase.STARTING
        self.interrupted = False
        self.save_lock = threading.Lock()

    def request_stop(self, sig: signal.Signals) -> bool:
        return False

    def save_partial(self) -> None:
        """Records what is finished; runs on the signal thread with `save_lock` held."""

    def signals(self) -> StopSignals:
        quiet_resource_tracker()
        return StopSignals(self.on_first_signal, self.force_exit)

    def on_first_signal(self, sig: signal.Signals) -> None:
        self.interrupted = True
        if self.phase in self.graceful_phases and self.request_stop(sig):
            return
        if self.phase != Phase.DONE:
            self.force_exit(sig)

    def force_exit(self, sig: signal.Signals) -> None:
        """Ends the engine's processes now, saves what is known, exits 130."""
        self.interrupted = True
        if self.phase == Phase.DONE:
            return  # the results are written; the normal exit is moments away
        err_console.print(f"\n[red]{sig.name}[/red]: forced exit; {self.forced_note}")
        try:
            logging.disable(logging.CRITICAL)  # vLLM's front-end logs its dead engine core: noise now
            threading.excepthook = _silent  # and its threads fail (vLLM-Omni's orchestrator, in start-up)
            children = [p.pid for p in psutil.Process().children()]
            terminate_children(grace_s=1.0)
            remove_live(children)  # the engine's run folder: os._exit runs no clean-up of its own
            # Held until exit, so the main thread is never cut off in the middle of its own write.
            if self.save_lock.acquire(timeout=5.0):
                self.save_partial()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)


def _silent(args: threading.ExceptHookArgs) -> None:
    pass


class BenchInterrupts(EngineRunInterrupts):
    """Ctrl-C / SIGTERM for one `omni bench`, local or --ray (the policy is shared with `omni synth`).

    The first signal while passes run (with --ray also while engines start: this
    process only waits on Ray) stops the run: nothing more is submitted,
    requests in flight get their grace, the engines are closed and the
    completed passes reported. During a local engine start-up, while scoring,
    and on a second signal, the engines' processes are ended, the completed
    passes written, exit 130.
    """

    forced_note = "completed passes are kept"

    def __init__(self, stop: BenchStop, *, graceful_start: bool = False):
        super().__init__()
        self.stop = stop
        self.engines = "engines are" if graceful_start else "engine is"  # --ray: N engines
        self.save_lock = stop.save_lock
        self.graceful_phases = ((Phase.STARTING,) if graceful_start else ()) + (Phase.RUNNING, Phase.CLOSING)
        self.progress: RequestProgress | None = None

    def request_stop(self, sig: signal.Signals) -> bool:
        err_console.print(
            f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.stop.grace_s:g}s to finish, "
            f"then the {self.engines} closed and completed passes are reported (again to force)"
        )
        return self.stop.request()

    def save_partial(self) -> None:
        if self.progress is not None:
            self.progress.stop()  # restores the terminal before os._exit
        self.stop.write_partial()


# The message of multiprocessing's resource tracker at its exit, when it unlinks
# semaphores whose owner never did.
_TRACKER_LEAK_WARNING = "ignore:resource_tracker:UserWarning"


def quiet_resource_tracker() -> None:
    """A forced exit kills vLLM's engine core (SIGKILL after 1 s), so its multiprocessing
    semaphores are never unlinked by it; the shared resource tracker process unlinks
    them and would print "There appear to be 1 leaked semaphore objects" after the
    command has ended. The tracker starts with our interpreter's -W options (when
    vLLM starts its engine core): call this before the engine starts."""
    if _TRACKER_LEAK_WARNING not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_LEAK_WARNING)  # read by child interpreters only, not by this one
