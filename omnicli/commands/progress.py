"""Progress and chatter of the long commands (synth, bench, eval-wer), always on stderr.

- On a terminal: Rich's live progress bar.
- Without one (a pipe, `nohup`, CI logs): a plain line every few seconds
  (`synth: 12/100 done, 1 failed, 3.20 audio-s/s, 35s elapsed`) and one at
  the end, so logs show the command is alive without control characters.
- `--quiet`: no progress and no notes; warnings, errors and results still print.
- `--verbose`: the library's INFO logs too (engine start-up, ASR loading).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Annotated, Any

import typer
from rich.progress import Progress, TaskID

from omnicli.commands.common import EXIT_USAGE, err_console

# Seconds between plain progress lines without a terminal ($OMNI_PROGRESS_INTERVAL overrides).
PLAIN_INTERVAL_S = 5.0

QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or notes: only warnings, errors and results.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Also print the library's INFO logs (engine start-up, ASR loading).")]


class _Verbosity:
    quiet = False
    verbose = False


VERBOSITY = _Verbosity()


def set_verbosity(quiet: bool, verbose: bool) -> None:
    """Applies --quiet / --verbose for this command (exclusive: both is a usage error)."""
    if quiet and verbose:
        err_console.print("[red]error:[/red] --quiet and --verbose exclude each other")
        raise typer.Exit(EXIT_USAGE)
    VERBOSITY.quiet, VERBOSITY.verbose = quiet, verbose
    level = logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    logging.getLogger("omnicli").setLevel(level)


def note(message: str) -> None:
    """A status line on stderr (engine ready, resuming, ...); silent with --quiet."""
    if not VERBOSITY.quiet:
        err_console.print(message, highlight=False)


def status(message: str):
    """A spinner on a terminal, one note line otherwise, nothing with --quiet."""
    if VERBOSITY.quiet:
        return contextlib.nullcontext()
    if err_console.is_terminal:
        return err_console.status(message)
    err_console.print(message, highlight=False)
    return contextlib.nullcontext()


def plain_interval() -> float:
    try:
        return max(0.0, float(os.environ.get("OMNI_PROGRESS_INTERVAL", PLAIN_INTERVAL_S)))
    except ValueError:
        return PLAIN_INTERVAL_S


def progress_line(task: Any) -> str:
    """`DESCRIPTION: done/total done, N failed, R audio-s/s, Ts elapsed` for one Rich task."""
    total = f"/{int(task.total)}" if task.total is not None else ""
    parts = [f"{task.description}: {int(task.completed)}{total} done"]
    if "failed" in task.fields:
        parts.append(f"{task.fields['failed']} failed")
    if "rate" in task.fields:
        parts.append(f"{task.fields['rate']:.2f} audio-s/s")
    parts.append(f"{task.elapsed or 0.0:.0f}s elapsed")
    return ", ".join(parts)


class PlainProgress(Progress):
    """Rich's Progress without the live display: a plain line per task every
    `interval` seconds when it advances, and a last line when it stops."""

    def __init__(self, *columns: Any, interval: float | None = None, **kwargs: Any):
        kwargs["disable"] = True
        super().__init__(*columns, **kwargs)
        self.interval = plain_interval() if interval is None else interval
        self._last_line: dict[TaskID, float] = {}
        self._printed_final: set[TaskID] = set()

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        self._last_line[task_id] = time.monotonic()
        return task_id

    def update(self, task_id: TaskID, *args: Any, **kwargs: Any) -> None:
        super().update(task_id, *args, **kwargs)
        now = time.monotonic()
        if now - self._last_line.get(task_id, 0.0) >= self.interval:
            self._last_line[task_id] = now
            self._emit(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def _emit(self, task_id: TaskID) -> None:
        with self._lock:
            task = self._tasks.get(task_id)
        if task is not None:
            self.console.print(progress_line(task), highlight=False, markup=False)

    def stop(self) -> None:
        for task_id in list(self._tasks):
            if task_id not in self._printed_final:
                self._printed_final.add(task_id)
                self._emit(task_id)
        super().stop()


def make_progress(*columns: Any, **kwargs: Any) -> Progress:
    """The progress display for this command: live bar, plain lines or none (--quiet), on stderr."""
    kwargs.setdefault("console", err_console)
    if VERBOSITY.quiet:
        return Progress(*columns, disable=True, **kwargs)
    if kwargs["console"].is_terminal:
        return Progress(*columns, **kwargs)
    return PlainProgress(*columns, **kwargs)
