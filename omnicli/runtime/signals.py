"""Ctrl-C / SIGTERM / SIGHUP for long batch commands: the first asks to stop, the next one forces.

Signals are read on a watcher thread from CPython's wakeup fd rather than in
a Python signal handler, because the main thread may be blocked in native
code (vLLM start-up, a torch op) for a long time: the user's second Ctrl-C
must work even then. `omnicli.commands.interrupts.EngineRunInterrupts` is
what `omni synth` and `omni bench` do with them: stop gracefully first,
force on the next one.

SIGHUP (the terminal or ssh session closed) is a stop like SIGTERM. Its
terminal is gone, so writing to it would fail (EIO) in the middle of the
shutdown: standard output and error that are that terminal are first
pointed at /dev/null (output redirected to a file is left alone).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import resource_tracker
from types import FrameType

Callback = Callable[[signal.Signals], None]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    """Context manager (main thread only) routing SIGINT/SIGTERM/SIGHUP to callbacks.

    `on_first(sig)` runs for the first signal, `on_force(sig)` for every later
    one; both run on the watcher thread, so they must be thread-safe (e.g.
    `loop.call_soon_threadsafe`). Either callback may be swapped at any time.
    """

    def __init__(self, on_first: Callback, on_force: Callback, signals: Iterable[int] = STOP_SIGNALS):
        self.on_first = on_first
        self.on_force = on_force
        self.signals = tuple(signal.Signals(s) for s in signals)
        self.received: list[signal.Signals] = []
        self._old_handlers: dict[signal.Signals, signal._HANDLER] = {}
        self._old_wakeup = -1
        self._pipe: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._terminal_fds: list[int] = []

    @property
    def count(self) -> int:
        return len(self.received)

    def __enter__(self) -> StopSignals:
        # Noted now: once the terminal has hung up, isatty() on it fails (EIO) like every write.
        self._terminal_fds = [fd for fd in (1, 2) if _isatty(fd)]
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

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self._old_wakeup)
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        if self._pipe is None:  # never entered
            return
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
                if sig == signal.SIGHUP:
                    _leave_hung_up_terminal(self._terminal_fds)
                self.received.append(sig)
                callback = self.on_first if len(self.received) == 1 else self.on_force
                try:
                    callback(sig)
                except OSError:
                    pass  # its message could not be written (a closed terminal): keep watching for the next signal


def _ignore(signum: int, frame: FrameType | None) -> None:
    pass


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _leave_hung_up_terminal(fds: list[int]) -> None:
    """Points `fds` (stdout/stderr that were a terminal) at /dev/null: after SIGHUP it is gone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)



@contextlib.contextmanager
def interrupts_blocked_for_children() -> Iterator[None]:
    """SIGINT blocked in the calling thread: the threads it starts meanwhile and the processes any of
    them start (their children too) keep it blocked, across exec, so a terminal's Ctrl-C, which
    reaches the whole process group, stops them not. Our main thread still gets it and stops them
    (SIGTERM); a process that heard Ctrl-C itself died in the middle of its imports, printing a
    KeyboardInterrupt traceback each. Python installs its SIGINT handler in each child, but a
    blocked signal never reaches it."""
    # multiprocessing starts its resource tracker with SIGINT blocked, then UNblocks it in the
    # calling thread (not restoring the mask it found): started first, it has no mask to undo.
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
