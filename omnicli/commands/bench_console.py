"""`omni bench`'s console: the run's progress as a live bar per phase and messages on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from omnicli.benchmark.entrypoint import BenchRunObserver
from omnicli.commands.common import RequestProgress
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.runtime.console import err_console, note, status

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from omnicli.benchmark.session import ProfileRun
    from omnicli.driver import RequestRecord
    from omnicli.driver.pool import EngineFacts


class ConsoleObserver(BenchRunObserver):
    """Renders the run: a live bar per phase, messages on stderr; tells `interrupts` the phase."""

    def __init__(self, progress: RequestProgress, interrupts: EngineRunInterrupts, *, ray_engines: int | None = None):
        self.progress = progress
        self.interrupts = interrupts
        self.ray_engines = ray_engines  # --ray: the engines started per profile
        self._seen = (0, 0, 0.0)
        self._status: AbstractContextManager[object] | None = None

    def engine_starting(self, run: ProfileRun) -> None:
        self.interrupts.phase = Phase.STARTING
        what = "engine" if self.ray_engines is None else f"{self.ray_engines} engine(s)[/bold] on Ray[bold]"
        note(f"[bold]starting {what}[/bold] for profile {run.label} ({run.profile.digest}) ...")

    def engine_started(self, run: ProfileRun, facts: list[EngineFacts]) -> None:
        self.interrupts.phase = Phase.RUNNING
        for f in facts:
            where = "" if f.node is None else f" {f.engine} ready on node {f.node[:12]}:"
            note(f"engine{where or ' ready:'} {f.model} on {f.device}, {f.sample_rate} Hz")

    def engine_closing(self, run: ProfileRun) -> None:
        self.interrupts.phase = Phase.CLOSING

    def phase_start(self, description: str, total: int) -> None:
        self._seen = (0, 0, 0.0)
        self.progress.start(description, total)

    def request_done(self, record: RequestRecord) -> None:
        self.progress.done(failed=record.error is not None, audio_seconds=record.audio_duration)

    def phase_progress(self, done: int, failed: int, audio_seconds: float) -> None:
        seen_done, seen_failed, seen_audio = self._seen
        new = done - seen_done
        if new <= 0:  # polled again with nothing new (or an engine that did not answer): never counted down
            return
        new_failed = max(0, failed - seen_failed)
        for i in range(new):  # the bar counts requests one by one
            self.progress.done(failed=i < new_failed, audio_seconds=(audio_seconds - seen_audio) / new)
        self._seen = (done, failed, audio_seconds)

    def phase_end(self) -> None:
        self.progress.end()

    def run_file(self, path: Path) -> None:
        note(f"wrote {path}")

    def info(self, message: str) -> None:
        note(message)

    def warning(self, message: str) -> None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)

    def writing(self) -> None:
        self.interrupts.phase = Phase.DONE  # from here on a signal changes nothing: the results follow at once

    def scoring(self, label: str, metrics: Sequence[str]) -> None:
        self.interrupts.phase = Phase.SCORING  # a signal writes the benchmark (the passes scored so far), exits 130
        self._status = status(f"scoring {label} ({','.join(metrics)}) ...")
        self._status.__enter__()

    def scored(self, label: str, figures: dict) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None
        keys = ("seed_wer_mean", "sim_mean", "sim_backend", "dnsmos_ovrl_mean", "utmos_mean")
        note(f"eval {label}: " + ", ".join(f"{k} {figures[k]}" for k in keys if figures.get(k) is not None))
