"""Progress without a terminal: plain lines instead of Rich's live bar.

A pipe, `nohup` or a CI log gets a line every few seconds
(`synth: 12/100 done, 1 failed, 3.20 audio-s/s, 35s elapsed`) and one at
the end, so logs show the command is alive without control characters.
`omnicli.commands.common.progress_bar` picks this or the live bar.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rich.progress import Progress, TaskID

# Seconds between plain progress lines without a terminal ($OMNI_PROGRESS_INTERVAL overrides).
PLAIN_INTERVAL_S = 5.0


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
            # soft_wrap: one line per update whatever console and width it is given (logs are read by scripts)
            self.console.print(progress_line(task), highlight=False, markup=False, soft_wrap=True)

    def stop_task(self, task_id: TaskID) -> None:
        """Ends one task (a phase): its last line now, not when the whole display stops."""
        super().stop_task(task_id)
        self._final_line(task_id)

    def stop(self) -> None:
        for task_id in list(self._tasks):
            self._final_line(task_id)
        super().stop()

    def _final_line(self, task_id: TaskID) -> None:
        if task_id not in self._printed_final:
            self._printed_final.add(task_id)
            self._emit(task_id)
