"""A benchmark session: for each profile, start its engines, warm them up, run every pass.

The engines of a profile are an `EnginePool` (omnicli.driver.pool): one in
this process (`LocalPool`) or N Ray actors (`omnicli.driver.ray_pool.RayPool`)
that run each phase at the same time; the session is the same for both.
A pool of one engine gives a `PassResult` per pass; a fleet (`per_engine`)
an `EnginesPass` holding each engine's, merged when reported
(omnicli.benchmark.engines). A fleet's engine that dies ends the run after
that phase, its pass reported over the engines that finished it
(`engine_error` names it).

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
ended; the pass it belonged to keeps its finished rounds as well.

With `plan.interleave` the profiles' rounds alternate (A r1, B r1, A r2, ...)
so that load drifting on the machine falls on every profile alike (see
`omnicli.benchmark.compare`). All engines are started first and kept warm;
when a later one cannot start beside those already running (memory), the
session says so, closes them and starts each profile's engine per round.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omnicli.driver import STOP_GRACE_S, LoadShape, Prompt, RequestRecord
from omnicli.driver.pool import EngineFacts, EnginePool, EngineStartError, RoundResult, run_round
from omnicli.engine.request import EngineDead, EngineStats
from omnicli.runtime.clock import utc_now

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

__all__ = [
    "BenchObserver", "BenchPlan", "BenchSession", "EngineFacts", "EnginePass", "EngineStartError", "EnginesPass",
    "PassResult", "ProfileRun", "RoundResult", "run_round",
]


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # not available on this platform
        return None


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
    profile: ResolvedProfile


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


@dataclass
class EnginePass:
    """One engine's share of a fleet's pass: its result, or the error that ended it."""

    engine: int
    node: str | None
    result: PassResult | None
    error: str | None = None
    machine: dict | None = None  # `machine_facts` of the engine's own node


@dataclass
class EnginesPass:
    """One load shape of one profile, run by every engine of a fleet at once."""

    profile: ProfileRun
    shape: LoadShape
    engines: list[EnginePass]

    @property
    def label(self) -> str:
        return f"{self.profile.label}/{self.shape.label}"

    @property
    def healthy(self) -> list[EnginePass]:
        return [e for e in self.engines if e.error is None and e.result is not None]

    @property
    def engine_error(self) -> str | None:
        errors = [f"engine {e.engine}: {e.error}" for e in self.engines if e.error is not None]
        return "; ".join(errors) or None


SessionPass = PassResult | EnginesPass


class BenchObserver:
    """Progress hooks; the command renders them, tests record them. All optional."""

    def engine_starting(self, run: ProfileRun) -> None: ...
    def engine_started(self, run: ProfileRun, facts: list[EngineFacts]) -> None: ...
    def engine_closing(self, run: ProfileRun) -> None: ...
    def phase_start(self, description: str, total: int) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def phase_progress(self, done: int, failed: int, audio_seconds: float) -> None:
        """A pool's running totals of the phase (engines whose records are elsewhere, e.g. on Ray)."""

    def phase_end(self) -> None: ...
    def round_done(self, run: ProfileRun, shape: LoadShape, index: int, result: RoundResult,
                   engine: EngineFacts) -> None: ...
    def run_file(self, path: Path) -> None:
        """An engine wrote a file of its own into the result folder (`write_run_files`)."""

    def warning(self, message: str) -> None: ...


RoundSink = Callable[[ProfileRun, LoadShape, int, RoundResult, EngineFacts], None]


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
    """`stop` was set, or a fleet's engine died: no further phase runs."""


@dataclass
class _Engines:
    """A started pool of one profile, with its engines' facts."""

    run: ProfileRun
    pool: EnginePool
    facts: list[EngineFacts]


Warm = list[tuple[int, int]]  # per engine: (warmup requests, failed)


class BenchSession:
    def __init__(
        self,
        runs: Sequence[ProfileRun],
        prompts: Sequence[Prompt],
        plan: BenchPlan,
        pools: Callable[[ResolvedProfile], EnginePool],
        observer: BenchObserver | None = None,
        grace_s: float = STOP_GRACE_S,
        *,
        round_sink: RoundSink | None = None,
        run_dir: Path | None = None,
    ):
        """`pools`: the engines of a profile (`LocalPool.factory(start_engine)`, `RayPool.factory(...)`);
        `round_sink`: gets each measured round with its audio before it is freed (--audio-out);
        `run_dir`: where each started pool writes its own run files (`write_run_files`), once per profile."""
        if not prompts:
            raise ValueError("no prompts to benchmark")
        self.runs = list(runs)
        self.prompts = prompts if isinstance(prompts, Sequence) else list(prompts)  # a Cycled view stays one
        self.plan = plan
        self.pools = pools
        self.observer = observer or BenchObserver()
        self.grace_s = grace_s
        self.round_sink = round_sink
        self.run_dir = run_dir
        self.stop = asyncio.Event()  # Ctrl-C, SIGTERM: wind down (see the module doc)
        self.unfinished: str | None = None  # the phase a stop or an engine failure ended early
        self.engine_error: EngineDead | None = None  # a fleet's engines that stopped serving (the run ended there)
        self.results: list[SessionPass] = []
        self.facts: list[EngineFacts] = []  # the engines last started
        self._files_written: set[str] = set()

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    async def run(self) -> list[SessionPass]:
        if self.plan.interleave and len(self.runs) > 1:
            try:
                await self._run_interleaved()
            except _Stopped:
                pass  # every engine is closed by now
            return self.results
        for index, run in enumerate(self.runs):
            if self.stopped or self.engine_error is not None:
                break
            await self._run_profile(index, run)
        return self.results

    async def _start(self, run: ProfileRun) -> _Engines:
        self.observer.engine_starting(run)
        pool = self.pools(run.profile)
        try:
            facts = await pool.start(self.stop)
        except BaseException as exc:
            await self._discard(pool)
            if isinstance(exc, Exception) and not isinstance(exc, EngineStartError):
                raise EngineStartError(run.label, exc) from exc
            raise
        started = _Engines(run, pool, facts)
        if not facts:  # a stop while the engines started
            await self._close(started)
            raise _Stopped
        self.facts = facts
        try:
            self.observer.engine_started(run, facts)
            if self.run_dir is not None and run.label not in self._files_written:
                self._files_written.add(run.label)
                for path in pool.write_run_files(self.run_dir):
                    self.observer.run_file(path)
        except BaseException:  # the engines are the caller's only once this returns
            await self._close(started)
            raise
        return started

    async def _discard(self, pool: EnginePool) -> None:
        """A pool whose start failed: whatever it did start ends (its own error is the one reported)."""
        try:
            await pool.close()
        except Exception as exc:
            self.observer.warning(f"closing engines that failed to start failed: {exc}")

    async def _close(self, started: _Engines) -> None:
        self.observer.engine_closing(started.run)
        try:
            await started.pool.close()
        except Exception as exc:  # never hide the original error behind a close failure
            self.observer.warning(f"closing the engine of profile {started.run.label!r} failed: {exc}")

    async def _run_profile(self, index: int, run: ProfileRun) -> None:
        try:
            started = await self._start(run)
        except _Stopped:
            return  # stopped while the engines started: they are closed, run() starts no further profile
        try:
            await self._measure(index, started)
        except _Stopped:
            pass  # the engines are closed below; run() starts no further profile
        finally:
            await self._close(started)

    async def _measure(self, index: int, started: _Engines) -> None:
        """The warmup, then every pass of one pool; raises _Stopped when `stop` cut a phase short."""
        warm = await self._warmup(index, started)
        for shape in self.plan.shapes:
            started_at = utc_now()
            rounds: list[list[RoundResult]] = []
            for r in range(self.plan.rounds):
                try:
                    _add(rounds, await self._round(index, started, shape, r))
                except BaseException:  # a stop, the engine's death, anything: the rounds that finished are kept
                    if any(rounds):  # (a pass of fewer rounds); the cut one is not
                        self._keep(self._pass_result(started, shape, rounds, started_at, warm))
                    raise
                if self._engine_failed(rounds):
                    break
            self._keep(self._pass_result(started, shape, rounds, started_at, warm))
            if self.engine_error is not None:
                raise _Stopped
            warm = [(0, 0)] * len(started.facts)  # only the first pass of an engine follows the warmup

    def _keep(self, result: SessionPass | None) -> None:
        if result is not None:
            self.results.append(result)

    def _engine_failed(self, rounds: list[list[RoundResult]]) -> bool:
        """Notes a fleet's engines that stopped serving (`engine_error`); True when one did."""
        errors = [f"engine {i}: {error}" for i, error in enumerate(_errors(rounds)) if error is not None]
        if errors:
            self.engine_error = EngineDead("; ".join(errors))
        return bool(errors)

    async def _round(self, index: int, started: _Engines, shape: LoadShape, r: int) -> list[RoundResult]:
        """One measured round on every engine, with the load average around it; its audio goes to the
        sink and `round_done`, then is freed."""
        run = started.run
        desc = f"{run.label} {shape.label}" + (f" round {r + 1}/{self.plan.rounds}" if self.plan.rounds > 1 else "")
        before = _load_average()
        id_prefix = f"p{index}-{shape.label}-r{r}"
        results = await self._phase(started, desc, self.prompts, shape, id_prefix, self.plan.keep_pcm)
        after = _load_average()
        for facts, result in zip(started.facts, results):
            result.load = None if before is None or after is None else (before + after) / 2
            if result.error is not None:
                continue
            if self.round_sink is not None:
                self.round_sink(run, shape, r, result, facts)
            self.observer.round_done(run, shape, r, result, facts)
            for rec in result.records:  # audio was handed on; free it
                rec.pcm = None
        return results

    async def _run_interleaved(self) -> None:
        """Every profile's engine warm at once, or (when a later one cannot start beside the others)
        one started per round; per load shape, round r of every profile before round r + 1 of any."""
        started: list[_Engines] = []
        try:
            for run in self.runs:
                try:
                    started.append(await self._start(run))
                except EngineStartError as exc:
                    if not started:
                        raise
                    self.observer.warning(
                        f"{exc}, with {len(started)} engine(s) already running: closing them; each profile's engine "
                        "is now started for each of its rounds (interleaved rounds then include no start-up, but "
                        "each follows a fresh engine's warmup)"
                    )
                    break
            if len(started) < len(self.runs):
                for engines in started:
                    await self._close(engines)
                started = []
            warm = {index: await self._warmup(index, engines) for index, engines in enumerate(started)}
            for shape in self.plan.shapes:
                await self._interleaved_pass(shape, started or None, warm)
                warm = {}  # only the first pass of a warm engine follows its warmup
        finally:
            for engines in started:
                await self._close(engines)

    async def _interleaved_pass(self, shape: LoadShape, kept_warm: list[_Engines] | None,
                                warm: dict[int, Warm]) -> None:
        started_at = utc_now()
        rounds: dict[int, list[list[RoundResult]]] = {index: [] for index in range(len(self.runs))}
        used: dict[int, _Engines] = {}  # the engines each profile's figures came from (for their facts)

        def keep() -> None:
            for index in range(len(self.runs)):
                if any(rounds[index]):
                    result = self._pass_result(used[index], shape, rounds[index], started_at, warm.get(index))
                    if isinstance(result, PassResult):
                        result.interleaved, result.engine_restarts = True, kept_warm is None
                    self._keep(result)

        try:
            for r in range(self.plan.rounds):
                for index, run in enumerate(self.runs):
                    if kept_warm is not None:
                        used[index] = kept_warm[index]
                        _add(rounds[index], await self._round(index, kept_warm[index], shape, r))
                        continue
                    if self.stopped:  # a stop while the last engine closed: start no other
                        raise _Stopped
                    engines = used[index] = await self._start(run)
                    try:
                        warm.setdefault(index, await self._warmup(index, engines))
                        _add(rounds[index], await self._round(index, engines, shape, r))
                    finally:
                        await self._close(engines)
        except BaseException:  # a stop, an engine that died or could not start again: the rounds that
            keep()  # finished are kept; the cut one is not
            raise
        keep()

    def _pass_result(self, started: _Engines, shape: LoadShape, rounds: list[list[RoundResult]], started_at: str,
                     warm: Warm | None) -> SessionPass | None:
        """One pass of one pool: its engine's result, or (a fleet) every engine's; None when no engine of
        a fleet finished it (it is then `unfinished`)."""
        warm = warm or [(0, 0)] * len(started.facts)
        errors = _errors(rounds)
        results = [
            None if error is not None else PassResult(
                profile=started.run, shape=shape, rounds=kept, sample_rate=facts.sample_rate, model=facts.model,
                device=facts.device, started_at=started_at, num_prompts=len(self.prompts),
                warmup_requests=warm[i][0], warmup_failed=warm[i][1],
            )
            for i, (facts, kept, error) in enumerate(zip(started.facts, rounds, errors))
        ]
        if not started.pool.per_engine:
            return results[0]
        passed = EnginesPass(started.run, shape, [
            EnginePass(engine=facts.engine, node=facts.node, result=result, error=error, machine=facts.machine)
            for facts, result, error in zip(started.facts, results, errors)
        ])
        if not passed.healthy:
            self.unfinished = passed.label  # no engine finished it: nothing to report
            return None
        return passed

    async def _warmup(self, index: int, started: _Engines) -> Warm:
        none = [(0, 0)] * len(started.facts)
        warm = warmup_phase(self.plan, self.prompts)
        if warm is None:
            return none
        prompts, shape = warm
        results = await self._phase(started, f"{started.run.label} warmup", prompts, shape, f"p{index}-warmup", False)
        if self._engine_failed([[r] for r in results]):
            raise _Stopped
        counts = [(len(r.records), sum(1 for rec in r.records if not rec.ok)) for r in results]
        failed = sum(f for _, f in counts)
        if failed:
            errors = sorted({rec.error for r in results for rec in r.records if rec.error})
            where = " across the engines" if started.pool.per_engine else ""
            self.observer.warning(f"{failed} warmup request(s) failed{where} ({'; '.join(errors[:3])})")
        return counts

    async def _phase(self, started: _Engines, description: str, prompts: Sequence[Prompt], shape: LoadShape,
                     id_prefix: str, keep_pcm: bool) -> list[RoundResult]:
        obs = self.observer
        if self.stopped:
            raise _Stopped
        obs.phase_start(description, len(prompts) * len(started.facts))
        self.unfinished = description  # until it completes
        try:
            results = await started.pool.phase(
                prompts, shape, id_prefix, keep_pcm=keep_pcm, on_done=obs.request_done, on_progress=obs.phase_progress,
                stop=self.stop, grace_s=self.grace_s,
            )
        finally:
            obs.phase_end()
        if not all(r.complete or r.error is not None for r in results):
            raise _Stopped
        self.unfinished = None
        return results


def _add(rounds: list[list[RoundResult]], results: list[RoundResult]) -> None:
    """Appends one round's results (one per engine) to each engine's rounds."""
    if not rounds:
        rounds.extend([] for _ in results)
    for kept, result in zip(rounds, results):
        kept.append(result)


def _errors(rounds: list[list[RoundResult]]) -> list[str | None]:
    """Per engine: why it stopped serving during these rounds, or None."""
    return [next((r.error for r in kept if r.error is not None), None) for kept in rounds]
