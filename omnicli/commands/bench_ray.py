"""`omni bench --ray`: progress, Ctrl-C and the report of a Ray bench (the work is `omnicli.scaleout.ray_bench`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from rich.markup import escape

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    VERBOSITY,
    RequestProgress,
    err_console,
    note,
)
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.scaleout.ray_bench import RayBenchObserver


class _RayProgressObserver(RayBenchObserver):
    """The local bench's bar per phase, fed by the engines' polled counts; tells `interrupts` the phase."""

    def __init__(self, progress: RequestProgress, interrupts: EngineRunInterrupts):
        self.progress = progress
        self.interrupts = interrupts
        self._seen = (0, 0, 0.0)

    def engines_starting(self, count: int, run: Any) -> None:
        self.interrupts.phase = Phase.STARTING
        note(f"[bold]starting {count} engine(s)[/bold] on Ray for profile {run.label} ({getattr(run.profile, 'digest', '')}) ...")

    def engine_ready(self, facts: dict) -> None:
        note(f"engine {facts['engine']} ready on node {str(facts['node'])[:12]}: {facts['model']} on {facts['device']}, {facts['sample_rate']} Hz")

    def phase_start(self, description: str, total: int) -> None:
        self.interrupts.phase = Phase.RUNNING
        self._seen = (0, 0, 0.0)
        self.progress.start(description, total)

    def phase_progress(self, done: int, failed: int, audio_seconds: float) -> None:
        seen_done, seen_failed, seen_audio = self._seen
        new = done - seen_done
        if new <= 0:
            return
        new_failed = max(0, failed - seen_failed)
        for i in range(new):  # the bar counts requests one by one
            self.progress.done(failed=i < new_failed, audio_seconds=(audio_seconds - seen_audio) / new)
        self._seen = (done, failed, audio_seconds)

    def phase_end(self) -> None:
        self.progress.end()

    def engines_closing(self) -> None:
        self.interrupts.phase = Phase.CLOSING

    def warning(self, message: str) -> None:
        err_console.print(f"[yellow]warning:[/yellow] {message}")


class _RayInterrupts(EngineRunInterrupts):
    """Ctrl-C / SIGTERM for `omni bench --ray`.

    The coordinator only waits on Ray, so a first signal is always graceful, also
    while engines start: engines stop submitting, requests in flight get their
    grace, the engines are closed, completed passes reported, exit 130. A
    second signal ends our child processes (a local Ray cluster we started,
    and with it the engines), writes the completed passes and exits 130.
    """

    graceful_phases = (Phase.STARTING, Phase.RUNNING, Phase.CLOSING)
    forced_note = "completed passes are kept"

    def __init__(self, grace_s: float):
        super().__init__()
        self.stop = threading.Event()
        self.grace_s = grace_s
        self.progress: RequestProgress | None = None
        self.save: Any = None  # writes the completed passes on a forced exit

    def request_stop(self, sig) -> bool:
        self.stop.set()
        err_console.print(
            f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.grace_s:g}s to finish, "
            "then the engines are closed and completed passes are reported (again to force)"
        )
        return True

    def save_partial(self) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self.save is not None:
            self.save()


def run_ray_bench(run: Any, prompts: Sequence, plan: Any, report: Any, *, address: str | None, resources: Any) -> NoReturn:
    """Runs the plan on `resources.engines` Ray engines, reports, exits with the bench's exit code."""
    from omnicli.benchmark.engines import build_engines_run
    from omnicli.commands.bench import _report
    from omnicli.scaleout.cluster import RayCluster, RayUnavailable
    from omnicli.scaleout.ray_bench import RayBench, RayEngineStartError

    bench: RayBench | None = None
    interrupts = _RayInterrupts(grace_s=0)

    def write(*, forced: bool = False) -> int:
        results = list(bench.results) if bench is not None else []
        runs = [
            build_engines_run(p, percentiles=report.percentiles, detailed=report.detailed)  # machine: the first engine's node
            for p in results
        ]
        return _report(
            results, report, runs=runs, ray=bench.ray_facts(address) if bench is not None else None,
            interrupted=interrupts.interrupted, unfinished=bench.unfinished if bench is not None else None,
            engine_error=None if bench is None or interrupts.interrupted else bench.engine_error, forced=forced,
        )

    interrupts.save = lambda: write(forced=True)
    error: BaseException | None = None
    with interrupts.signals():
        try:
            with RayCluster(address, resources, quiet=not VERBOSITY.verbose) as cluster:
                cluster.check_fits()
                bench = RayBench(cluster.ray, run, prompts, plan, resources)
                interrupts.grace_s = bench.grace_s
                bench.stop = interrupts.stop
                with RequestProgress(err_console) as progress:
                    interrupts.progress = progress
                    bench.observer = _RayProgressObserver(progress, interrupts)
                    try:
                        bench.run()
                    except RayEngineStartError as exc:
                        error = exc
                interrupts.phase = Phase.CLOSING  # leaving the cluster (shut down when we started it)
        except RayUnavailable as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_USAGE) from None
        interrupts.phase = Phase.DONE
        with interrupts.save_lock:
            code = write()
    if interrupts.interrupted:
        done = len(bench.results) if bench is not None else 0
        err_console.print(f"[yellow]interrupted[/yellow]: the engines were closed; {done} completed pass(es) reported")
        raise typer.Exit(EXIT_INTERRUPTED)
    if error is not None:
        err_console.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(EXIT_ENGINE)
    if bench is not None and bench.engine_error is not None:
        err_console.print(f"[red]engine failed:[/red] {escape(bench.engine_error)}")
        raise typer.Exit(EXIT_ENGINE)
    raise typer.Exit(code)
