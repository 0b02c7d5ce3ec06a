"""A local synth run: planned rows -> the request driver -> `RowSink` -> results.jsonl.

A request that fails is recorded as failed; when the engine itself fails
(a stage died or stopped responding) the requests it took down are left
pending instead, so that a resume retries them. The same holds when OUT
cannot be written (disk full, I/O error): that is not a property of the
utterance, so the run stops admitting rows and leaves the rest pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from omnicli.atomic import JsonlAppender
from omnicli.driver import STOP_GRACE_S, LoadShape, RequestRecord, drive
from omnicli.engine.request import EngineError
from omnicli.synth.plan import RESULTS
from omnicli.synth.results import SynthResult
from omnicli.synth.sink import OutputUnwritable, RowSink, prompt_for

if TYPE_CHECKING:
    from omnicli.engine.request import EngineLike
    from omnicli.manifest import ManifestRow
    from omnicli.profile import ResolvedProfile
    from omnicli.retention import Retainer


class RowRun(Protocol):
    """What a finished run (local `SynthRun` or `omni synth --ray`'s `RaySynthRun`) tells its summary."""

    results: list[SynthResult]  # this run's rows, in the order they finished
    engine_error: EngineError | None  # why the engine (or the actor pool) stopped serving; text only when written
    output_error: str | None  # why OUT could not be written: the run stopped
    left_pending: list[str]  # cut off by a stop, an engine failure or an unwritable OUT
    wall_seconds: float
    grace_s: float  # after a stop, how long requests in flight may finish

    @property
    def model_name(self) -> str: ...


class SynthRun:
    """Synthesizes planned rows with `concurrency` requests in flight: plan -> drive -> sink.

    The request driver (`omnicli.driver.drive`) runs the rows through the
    engine; each record it yields is sunk here: judged, written atomically
    as OUT/<utt>.wav, retained when suspect, and appended to results.jsonl.
    `stop` (an asyncio.Event; set it on the run's loop) stops admitting
    rows; requests in flight then get `grace_s` to finish before they are
    cancelled and left pending. When the engine fails as a whole, the run
    stops at once and `engine_error` says why. When OUT cannot be written
    (disk full, I/O error), `output_error` says so and the run stops like
    on `stop`; the row that hit it, and every row not written, stays pending.
    """

    def __init__(
        self,
        engine: EngineLike,
        out_dir: Path,
        *,
        resolved: ResolvedProfile | None = None,  # the profile the engine runs (default: engine.resolved)
        concurrency: int = 8,
        max_new_tokens: int | None = None,
        retainer: Retainer | None = None,
        on_result: Callable[[SynthResult], None] | None = None,
        grace_s: float = STOP_GRACE_S,
    ):
        self.engine = engine
        self.resolved = resolved if resolved is not None else engine.resolved
        self.out_dir = out_dir
        self.concurrency = max(1, concurrency)
        self.max_new_tokens = max_new_tokens
        self.on_result = on_result or (lambda _result: None)
        self.grace_s = grace_s
        self.stop = asyncio.Event()  # Ctrl-C, SIGTERM: no new rows
        self.results: list[SynthResult] = []
        self.engine_error: EngineError | None = None
        self.output_error: str | None = None  # OUT could not be written: disk full, I/O error
        self.left_pending: list[str] = []  # in flight when stopped, taken down by an engine failure, or not written
        self.wall_seconds = 0.0
        self._unwritten: list[str] = []  # finished after OUT failed: nothing recorded, redone by a re-run
        self.sink = RowSink(out_dir, self.resolved, retainer=retainer)

    @property
    def model_name(self) -> str:
        return self.engine.model_name

    async def run(self, rows: list[ManifestRow]) -> list[SynthResult]:
        """Runs `rows` into OUT (tidied by the caller, `tidy_out_dir`), appending each result to results.jsonl."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with JsonlAppender(self.out_dir / RESULTS) as results:
            await self.drive_rows(rows, keep=lambda result: results.append(result.model_dump(mode="json")))
        return self.results

    async def drive_rows(
        self, rows: list[ManifestRow], keep: Callable[[SynthResult], None] | None = None,
    ) -> list[SynthResult]:
        """Runs `rows` through the engine; each result goes to `keep` (after its wav is in
        place), then to `results` and `on_result`. `run` keeps them in results.jsonl; a Ray
        actor (`omnicli.synth.ray`) hands them to the Ray driver, the only writer of it.
        An OSError from `keep` stops the run like an unwritable OUT."""

        def sink_record(record: RequestRecord) -> None:
            if self.output_error is None:
                try:
                    result = self.sink.finish(record)
                    if keep is not None:
                        keep(result)  # after the wav is in place; whole or absent
                except OSError as exc:  # not this utterance's fault: stop, leave it pending
                    unwritable = isinstance(exc, OutputUnwritable)
                    self._output_failed(str(exc) if unwritable else f"cannot write {self.out_dir / RESULTS}: {exc}")
                else:
                    self.results.append(result)
                    self.on_result(result)
                    return
            self._unwritten.append(record.utt)

        # Prompts made as rows are admitted, records dropped once sunk: what the run holds
        # does not grow with the manifest (only the small results rows do).
        prompts = (prompt_for(row, self.resolved, max_new_tokens=self.max_new_tokens) for row in rows)
        driven = await drive(
            self.engine, prompts, LoadShape(concurrency=self.concurrency),
            keep_pcm=True, keep_records=False, on_record=sink_record, stop=self.stop, grace_s=self.grace_s,
        )
        self.engine_error = driven.engine_error
        self.left_pending = driven.left_pending + self._unwritten
        self.wall_seconds = driven.wall_seconds
        return self.results

    def _output_failed(self, message: str) -> None:
        self.output_error = message
        self.stop.set()  # nothing new is submitted; requests in flight are not written
