"""A benchmark session: for each profile, start an engine, warm it up, run every pass.

A pass is one load shape (one concurrency value of a sweep, or the open-loop
rate) run for `rounds` measured rounds over the same prompts. The engine is
restarted between profiles and always closed, also on errors and Ctrl-C.
Completed passes stay in `session.results` even when a later one fails, so a
caller can still report them.

`session.stop` (an asyncio.Event; set it on the session's loop) ends the
session early: nothing more is submitted, requests in flight get `grace_s`
to finish, the round they belong to is dropped (`session.unfinished` names
it: an incomplete round would mislead; the pass's finished rounds are kept,
as a pass of fewer rounds), the engine is closed and no further profile is
started. `unfinished` also names the phase an engine failure
ended.

With `plan.interleave` the profiles' rounds alternate (A r1, B r1, A r2, ...)
so that load drifting on the machine falls on every profile alike (see
`omnicli.benchmark.compare`). All engines are started first and kept warm;
when a later one cannot start beside those already running (memory), the
session says so, closes them and starts each profile's engine per round.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from omnicli.driver import STOP_GRACE_S, LoadShape, Prompt, RequestRecord, drive
from omnicli.engine.request import EngineStats


@dataclass
class RoundResult:
    records: list[RequestRecord]  # in submission order
    stats: EngineStats = field(default_factory=EngineStats)  # engine counters during the round
    complete: bool = True  # False when a stop cut it short (then `records` holds what finished)
    load: float | None = None  # the machine's 1-minute load average around the round (mean of before and after)


async def run_round(
    engine: Any,
    prompts: Sequence[Prompt],
    shape: LoadShape,
    *,
    id_prefix: str,
    keep_pcm: bool = False,
    on_done: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 0.0,
) -> RoundResult:
    """Offers every prompt once following `shape` through the request driver.

    Raises `EngineDead` when the engine stopped serving: the round ends at
    once. Once `stop` is set the result is incomplete (see `omnicli.driver`).
    """
    driven = await drive(engine, prompts, shape, id_prefix=id_prefix, keep_pcm=keep_pcm, on_record=on_done, stop=stop, grace_s=grace_s)
    if driven.engine_error is not None:
        raise driven.engine_error
    records = sorted(driven.records, key=lambda r: r.start)
    return RoundResult(records=records, stats=driven.stats, complete=driven.complete)


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return None


class EngineStartError(RuntimeError):
    """The engine for one profile could not be started."""

    def __init__(self, profile_label: str, cause: BaseException):
        super().__init__(f"engine for profile {profile_label!r} failed to start: {cause}")
        self.profile_label = profile_label
        self.cause = cause


@dataclass
class BenchPlan:
    shapes: list[LoadShape]
    rounds: int = 1
    warmup_requests: int = 0  # run and discarded before the first pass of each engine
    warmup_pass: bool = False  # a whole discarded pass of the first shape instead
    keep_pcm: bool = False  # keep each request's audio (for --audio-out / --keep-failed)
    interleave: bool = False  # alternate the profiles' rounds (A B A B ...) instead of profile after profile

    def __post_init__(self) -> None:
        if not self.shapes:
            raise ValueError("a plan needs at least one load shape")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1 (got {self.rounds})")
        if self.warmup_requests < 0:
            raise ValueError(f"warmup must be >= 0 (got {self.warmup_requests})")


@dataclass
class ProfileRun:
    """A profile to benchmark and the label its results carry (`a`, `b`, or its name)."""

    label: str
    profile: Any  # ResolvedProfile


@dataclass
class PassResult:
    profile: ProfileRun
    shape: LoadShape
    rounds: list[RoundResult]
    sample_rate: int
    model: str
    device: str
    started_at: str
    num_prompts: int
    warmup_requests: int = 0  # discarded requests run on this engine before this pass
    warmup_failed: int = 0
    interleaved: bool = False  # its rounds alternated with the other profiles' (their figures are compared per round)
    engine_restarts: bool = False  # interleaved with the engine started afresh for each round (memory)

    @property
    def label(self) -> str:
        return f"{self.profile.label}/{self.shape.label}"

    @property
    def record_rounds(self) -> list[list[RequestRecord]]:
        return [r.records for r in self.rounds]

    @property
    def stats(self) -> EngineStats:
        total = EngineStats()
        for r in self.rounds:
            total = total.plus(r.stats)
        return total




class BenchObserver:
    """Progress hooks; the command renders them, tests record them. All optional."""

    def engine_starting(self, run: ProfileRun) -> None: ...
    def engine_started(self, run: ProfileRun, engine: Any) -> None: ...
    def engine_closing(self, run: ProfileRun) -> None: ...
    def phase_start(self, description: str, total: int) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def phase_end(self) -> None: ...
    def round_done(self, run: ProfileRun, shape: LoadShape, index: int, result: RoundResult, engine: Any) -> None: ...
    def warning(self, message: str) -> None: ...


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def warmup_prompts(prompts: Sequence[Prompt], count: int) -> list[Prompt]:
    """The first `count` prompts, cycled when there are fewer."""
    return [prompts[i % len(prompts)] for i in range(count)] if prompts else []


def warmup_phase(plan: BenchPlan, prompts: Sequence[Prompt]) -> tuple[Sequence[Prompt], LoadShape] | None:
    """The discarded phase run on each engine before its first pass: (prompts, load shape), or None."""
    first = plan.shapes[0]
    if plan.warmup_pass:
        return prompts, first
    if plan.warmup_requests:
        # Warm the batch sizes the first pass will use, without an arrival schedule.
        return warmup_prompts(prompts, plan.warmup_requests), LoadShape(concurrency=first.concurrency, seed=first.seed)
    return None


class _Stopped(Exception):
    """`stop` was set: no further phase runs."""


class BenchSession:
    def __init__(
        self,
        runs: Sequence[ProfileRun],
        prompts: Sequence[Prompt],
        plan: BenchPlan,
        start_engine: Callable[[Any], Awaitable[Any]],
        observer: BenchObserver | None = None,
        grace_s: float = STOP_GRACE_S,
    ):
        if not prompts:
            raise ValueError("no prompts to benchmark")
        self.runs = list(runs)
        self.prompts = prompts if isinstance(prompts, Sequence) else list(prompts)  # a Cycled view stays one
        self.plan = plan
        self.start_engine = start_engine
        self.observer = observer or BenchObserver()
        self.grace_s = grace_s
        self.stop = asyncio.Event()  # Ctrl-C, SIGTERM: wind down (see the module doc)
        self.unfinished: str | None = None  # the phase a stop or an engine failure ended early
        self.results: list[PassResult] = []

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    async def run(self) -> list[PassResult]:
        if self.plan.interleave and len(self.runs) > 1:
            try:
                await self._run_interleaved()
            except _Stopped:
                pass  # every engine is closed by now
            return self.results
        for index, run in enumerate(self.runs):
            if self.stopped:
                break
            await self._run_profile(index, run)
        return self.results

    async def _start(self, run: ProfileRun) -> Any:
        self.observer.engine_starting(run)
        try:
            engine = await self.start_engine(run.profile)
        except Exception as exc:
            raise EngineStartError(run.label, exc) from exc
        try:
            self.observer.engine_started(run, engine)
        except BaseException:  # the engine is the caller's only once this returns
            await self._close(run, engine)
            raise
        return engine

    async def _close(self, run: ProfileRun, engine: Any) -> None:
        self.observer.engine_closing(run)
        try:
            await engine.close()
        except Exception as exc:  # never hide the original error behind a close failure
            self.observer.warning(f"closing the engine of profile {run.label!r} failed: {exc}")

    async def _run_profile(self, index: int, run: ProfileRun) -> None:
        engine = await self._start(run)
        try:
            await self._measure(index, run, engine)
        except _Stopped:
            pass  # the engine is closed below; run() starts no further profile
        finally:
            await self._close(run, engine)

    async def _measure(self, index: int, run: ProfileRun, engine: Any) -> None:
        """The warmup, then every pass of one engine; raises _Stopped when `stop` cut a phase short."""
        warm_n, warm_failed = await self._warmup(index, run, engine)
        for shape in self.plan.shapes:
            started_at = utc_now()
            rounds: list[RoundResult] = []
            for r in range(self.plan.rounds):
                try:
                    rounds.append(await self._round(index, run, engine, shape, r))
                except _Stopped:
                    if rounds:  # the rounds that finished are kept (a pass of fewer rounds); the cut one is not
                        self.results.append(self._pass_result(run, shape, rounds, engine, started_at, warm_n, warm_failed))
                    raise
            self.results.append(self._pass_result(run, shape, rounds, engine, started_at, warm_n, warm_failed))
            warm_n = warm_failed = 0  # only the first pass of an engine follows the warmup

    async def _round(self, index: int, run: ProfileRun, engine: Any, shape: LoadShape, r: int) -> RoundResult:
        """One measured round, with the load average around it; its audio goes to `round_done`, then is freed."""
        desc = f"{run.label} {shape.label}" + (f" round {r + 1}/{self.plan.rounds}" if self.plan.rounds > 1 else "")
        before = _load_average()
        result = await self._phase(engine, desc, self.prompts, shape, f"p{index}-{shape.label}-r{r}", self.plan.keep_pcm)
        after = _load_average()
        result.load = None if before is None or after is None else (before + after) / 2
        self.observer.round_done(run, shape, r, result, engine)
        for rec in result.records:  # audio was handed to round_done; free it
            rec.pcm = None
        return result

    async def _run_interleaved(self) -> None:
        """Every profile's engine warm at once, or (when a later one cannot start beside the others)
        one started per round; per load shape, round r of every profile before round r + 1 of any."""
        engines: list[Any] = []
        try:
            for run in self.runs:
                try:
                    engines.append(await self._start(run))
                except EngineStartError as exc:
                    if not engines:
                        raise
                    self.observer.warning(
                        f"{exc}, with {len(engines)} engine(s) already running: closing them; each profile's engine "
                        "is now started for each of its rounds (interleaved rounds then include no start-up, but "
                        "each follows a fresh engine's warmup)"
                    )
                    break
            if len(engines) < len(self.runs):
                for run, engine in zip(self.runs, engines):
                    await self._close(run, engine)
                engines = []
            warm = {index: await self._warmup(index, run, engine) for index, (run, engine) in enumerate(zip(self.runs, engines))}
            for shape in self.plan.shapes:
                await self._interleaved_pass(shape, engines or None, warm)
                warm = {}  # only the first pass of a warm engine follows its warmup
        finally:
            for run, engine in zip(self.runs, engines):
                await self._close(run, engine)

    async def _interleaved_pass(self, shape: LoadShape, engines: list[Any] | None, warm: dict[int, tuple[int, int]]) -> None:
        started_at = utc_now()
        rounds: dict[int, list[RoundResult]] = {index: [] for index in range(len(self.runs))}
        used: dict[int, Any] = {}  # the engine each profile's figures came from (for its facts)

        def keep() -> None:
            for index, run in enumerate(self.runs):
                if rounds[index]:
                    result = self._pass_result(run, shape, rounds[index], used[index], started_at, *warm.get(index, (0, 0)))
                    result.interleaved, result.engine_restarts = True, engines is None
                    self.results.append(result)

        try:
            for r in range(self.plan.rounds):
                for index, run in enumerate(self.runs):
                    if engines is not None:
                        used[index] = engines[index]
                        rounds[index].append(await self._round(index, run, engines[index], shape, r))
                        continue
                    if self.stopped:  # a stop while the last engine closed: start no other
                        raise _Stopped
                    engine = used[index] = await self._start(run)
                    try:
                        warmed = await self._warmup(index, run, engine)
                        warm.setdefault(index, warmed)
                        rounds[index].append(await self._round(index, run, engine, shape, r))
                    finally:
                        await self._close(run, engine)
        except _Stopped:
            keep()  # the rounds that finished are kept; the cut one is not
            raise
        keep()

    def _pass_result(self, run, shape, rounds, engine, started_at, warm_n, warm_failed) -> PassResult:
        return PassResult(
            profile=run,
            shape=shape,
            rounds=rounds,
            sample_rate=int(engine.sample_rate),
            model=str(getattr(engine, "model_name", "")),
            device=str(getattr(engine, "device", "")),
            started_at=started_at,
            num_prompts=len(self.prompts),
            warmup_requests=warm_n,
            warmup_failed=warm_failed,
        )

    async def _warmup(self, index: int, run: ProfileRun, engine: Any) -> tuple[int, int]:
        warm = warmup_phase(self.plan, self.prompts)
        if warm is None:
            return 0, 0
        prompts, shape = warm
        result = await self._phase(engine, f"{run.label} warmup", prompts, shape, f"p{index}-warmup", False)
        failed = sum(1 for r in result.records if not r.ok)
        if failed:
            errors = sorted({r.error for r in result.records if r.error})
            self.observer.warning(f"{failed} warmup request(s) failed ({'; '.join(errors[:3])})")
        return len(result.records), failed

    async def _phase(self, engine, description, prompts, shape, id_prefix, keep_pcm) -> RoundResult:
        obs = self.observer
        if self.stopped:
            raise _Stopped
        obs.phase_start(description, len(prompts))
        self.unfinished = description  # until it completes
        try:
            result = await run_round(
                engine, prompts, shape, id_prefix=id_prefix, keep_pcm=keep_pcm, on_done=obs.request_done,
                stop=self.stop, grace_s=self.grace_s,
            )
        finally:
            obs.phase_end()
        if not result.complete:
            raise _Stopped
        self.unfinished = None
        return result
