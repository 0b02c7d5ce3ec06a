"""Where a bench's engines run, behind one seam: in this process, or N at once elsewhere.

An `EnginePool` starts its engines, runs one phase (the warmup, or one round
of a pass) on every engine at once and returns one `RoundResult` per
engine, then closes them. `BenchSession` (omnicli.benchmark.session) only
talks to this seam, as vLLM's front end does not change when its engine
core moves in-process or to N data-parallel engines:

- `LocalPool`: one engine in this process (`omni bench`);
- `omnicli.driver.ray_pool.RayPool`: N engines, one per Ray actor
  (`omni bench --ray`); their figures are merged per pass
  (omnicli.benchmark.engines).

An engine that dies mid-phase: a `LocalPool` raises `EngineDead` (its one
engine was the whole pool); a fleet returns that engine's round with its
`error` set and the others' rounds as they finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from omnicli.driver.drive import drive
from omnicli.driver.load import LoadShape
from omnicli.driver.records import Prompt, RequestRecord
from omnicli.engine.request import EngineStats

if TYPE_CHECKING:
    from omnicli.engine.request import EngineLike
    from omnicli.profile import ResolvedProfile

OnRecord = Callable[[RequestRecord], None]
OnProgress = Callable[[int, int, float], None]  # (finished, failed, audio seconds) of the phase so far
StartEngine = Callable[["ResolvedProfile"], Awaitable["EngineLike"]]


@dataclass
class RoundResult:
    records: list[RequestRecord]  # in submission order
    stats: EngineStats = field(default_factory=EngineStats)  # engine counters during the round
    complete: bool = True  # False when a stop cut it short (then `records` holds what finished)
    load: float | None = None  # the machine's 1-minute load average around the round (mean of before and after)
    error: str | None = None  # a fleet's engine that stopped serving during the round: why (its records are dropped)


async def run_round(
    engine: EngineLike,
    prompts: Sequence[Prompt],
    shape: LoadShape,
    *,
    id_prefix: str,
    keep_pcm: bool = False,
    on_done: OnRecord | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 0.0,
) -> RoundResult:
    """Offers every prompt once following `shape` through the request driver.

    Raises `EngineDead` when the engine stopped serving: the round ends at
    once. Once `stop` is set the result is incomplete (see `omnicli.driver`).
    """
    driven = await drive(engine, prompts, shape, id_prefix=id_prefix, keep_pcm=keep_pcm, on_record=on_done, stop=stop,
                         grace_s=grace_s)
    if driven.engine_error is not None:
        raise driven.engine_error  # the EngineDead the drive ended with
    records = sorted(driven.records, key=lambda r: r.start)
    return RoundResult(records=records, stats=driven.stats, complete=driven.complete)


class EngineStartError(RuntimeError):
    """The engine(s) for one profile could not be started.

    `message`: the pool's own account when it names its engines (a fleet);
    by default the profile and the cause.
    """

    def __init__(self, profile_label: str, cause: BaseException | None = None, *, message: str | None = None):
        super().__init__(message or f"engine for profile {profile_label!r} failed to start: {cause}")
        self.profile_label = profile_label
        self.cause = cause


@dataclass
class EngineFacts:
    """What one started engine of a pool tells the report."""

    engine: int  # its index in the pool
    model: str
    device: str
    sample_rate: int
    node: str | None = None  # the Ray node it runs on (a fleet)
    machine: dict | None = None  # `machine_facts` of that node (a fleet; None: this machine's)


class EnginePool(Protocol):
    """The engines of one profile: started, driven a phase at a time on all of them at once, closed."""

    per_engine: bool  # results name each engine (a fleet: merged per pass); False: one engine, reported as itself
    graceful_start: bool  # a stop can be honoured while engines start (the caller's thread only waits on them)

    async def start(self, stop: asyncio.Event) -> list[EngineFacts]:
        """Starts every engine; raises EngineStartError when one cannot start. Once `stop` is set a pool
        that can (`graceful_start`) gives up waiting and returns no facts."""
        ...

    async def phase(
        self, prompts: Sequence[Prompt], shape: LoadShape, id_prefix: str, *, keep_pcm: bool, on_done: OnRecord,
        on_progress: OnProgress, stop: asyncio.Event, grace_s: float,
    ) -> list[RoundResult]:
        """One round of `prompts` on every engine at once, one result per engine (in engine order).

        Per finished request: `on_done(record)` where records are at hand (in process), else
        `on_progress(done, failed, audio_s)` with the pool's running totals.
        """
        ...

    def write_run_files(self, run_dir: Path) -> list[Path]:
        """What the engines add to a run folder (`EngineLike.write_run_files`); the files written."""
        ...

    async def close(self) -> None:
        """Closes every engine (also after a failed or abandoned start); a close failure propagates."""
        ...


async def _start_real_engine(profile: ResolvedProfile) -> EngineLike:
    from omnicli.engine.backends import start_engine  # the engine (vLLM) is imported only when started

    return await start_engine(profile)


class LocalPool:
    """One engine in this process."""

    per_engine = False
    graceful_start = False  # an engine start-up holds this thread in native code: a signal ends it instead

    def __init__(self, profile: ResolvedProfile, start_engine: StartEngine | None = None):
        self.profile = profile
        self._start_engine = start_engine  # the real engine (omnicli.engine.backends) by default
        self.engine: EngineLike | None = None

    @classmethod
    def factory(cls, start_engine: StartEngine | None = None) -> Callable[[ResolvedProfile], LocalPool]:
        """A pool per profile, each engine started by `start_engine`."""
        return lambda profile: cls(profile, start_engine)

    async def start(self, stop: asyncio.Event) -> list[EngineFacts]:
        start = self._start_engine or _start_real_engine
        engine = self.engine = await start(self.profile)
        return [EngineFacts(engine=0, model=str(engine.model_name), device=str(engine.device),
                            sample_rate=int(engine.sample_rate))]

    async def phase(
        self, prompts: Sequence[Prompt], shape: LoadShape, id_prefix: str, *, keep_pcm: bool, on_done: OnRecord,
        on_progress: OnProgress, stop: asyncio.Event, grace_s: float,
    ) -> list[RoundResult]:
        if self.engine is None:
            raise RuntimeError("the pool's engine is not started")
        result = await run_round(self.engine, prompts, shape, id_prefix=id_prefix, keep_pcm=keep_pcm, on_done=on_done,
                                 stop=stop, grace_s=grace_s)
        return [result]

    def write_run_files(self, run_dir: Path) -> list[Path]:
        return [] if self.engine is None else self.engine.write_run_files(run_dir)

    async def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            await engine.close()
