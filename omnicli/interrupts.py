"""Ctrl-C / SIGTERM for long batch commands: the first asks to stop, the next one forces.

Signals are read on a watcher thread from CPython's wakeup fd rather than in
a Python signal handler, because the main thread may be blocked in native
code (vLLM start-up, a torch op) for a long time: the user's second Ctrl-C
must work even then. `EngineRunInterrupts` is what `omni synth` and
`omni bench` do with them: stop gracefully first, force on the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable

Callback = Callable[[signal.Signals], None]
STOP_GRACE_S = 5.0  # after a first Ctrl-C, requests in flight may finish for this long


class StopSignals:
    """Context manager (main thread only) routing SIGINT/SIGTERM to callbacks.

    `on_first(sig)` runs for the first signal, `on_force(sig)` for every later
    one; both run on the watcher thread, so they must be thread-safe (e.g.
    `loop.call_soon_threadsafe`). Either callback may be swapped at any time.
    """

    def __init__(self, on_first: Callback, on_force: Callback, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)):
        self.on_first = on_first
        self.on_force = on_force
        self.signals = tuple(signal.Signals(s) for s in signals)
        self.received: list[signal.Signals] = []
        self._old_handlers: dict = {}
        self._old_wakeup = -1
        self._pipe: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None

    @property
    def count(self) -> int:
        return len(self.received)

    def __enter__(self) -> "StopSignals":
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        for sig in self.signals:
            # A Python-level handler is needed for CPython to write the wakeup byte;
            # it does nothing itself (no KeyboardInterrupt in the middle of cleanup).
            self._old_handlers[sig] = signal.signal(sig, _ignore)
        self._old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, args=(r,), name="omni-stop-signals", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        signal.set_wakeup_fd(self._old_wakeup)
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        r, w = self._pipe
        os.close(w)  # the watcher reads EOF and ends
        if self._thread is not None:
            self._thread.join(2.0)
        with contextlib.suppress(OSError):
            os.close(r)

    def _watch(self, fd: int) -> None:
        wanted = {int(s) for s in self.signals}
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number not in wanted:
                    continue
                sig = signal.Signals(number)
                self.received.append(sig)
                callback = self.on_first if len(self.received) == 1 else self.on_force
                callback(sig)


def _ignore(signum, frame) -> None:
    pass


class EngineRunInterrupts:
    """The Ctrl-C / SIGTERM policy of a command that runs the engine (synth, bench).

    `phase` is "starting" (engine start-up: the main thread may sit in native
    code for a long time), "running", "closing" or "done" (results written,
    the normal exit is moments away). The first signal in one of
    `graceful_phases` calls `request_stop`, which must be thread-safe and
    return False when there is nothing to stop yet. In any other phase but
    "done", and for every later signal, `force_exit` ends our child processes
    (the engine's), calls `save_partial` holding `save_lock` and exits 130.
    Commands subclass it and write their own results under `save_lock` too.
    """

    graceful_phases: tuple[str, ...] = ("running",)
    forced_note = "finished work is kept"

    def __init__(self) -> None:
        self.phase = "starting"
        self.interrupted = False
        self.save_lock = threading.Lock()

    def request_stop(self, sig: signal.Signals) -> bool:
        return False

    def save_partial(self) -> None:
        """Records what is finished; runs on the signal thread with `save_lock` held."""

    def signals(self) -> StopSignals:
        return StopSignals(self.on_first_signal, self.force_exit)

    def on_first_signal(self, sig: signal.Signals) -> None:
        self.interrupted = True
        if self.phase in self.graceful_phases and self.request_stop(sig):
            return
        if self.phase != "done":
            self.force_exit(sig)

    def force_exit(self, sig: signal.Signals) -> None:
        """Ends the engine's processes now, saves what is known, exits 130."""
        from omnicli.commands.common import EXIT_INTERRUPTED, err_console
        from omnicli.orphans import terminate_children

        self.interrupted = True
        if self.phase == "done":
            return  # the results are written; the normal exit is moments away
        err_console.print(f"\n[red]{sig.name}[/red]: forced exit; {self.forced_note}")
        try:
            terminate_children(grace_s=1.0)
            # Held until exit, so the main thread is never cut off in the middle of its own write.
            if self.save_lock.acquire(timeout=5.0):
                self.save_partial()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
