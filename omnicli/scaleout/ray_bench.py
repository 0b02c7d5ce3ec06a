"""`omni bench --ray`: N engines, one per Ray actor, running the same passes at the same time.

The coordinator (`RayBench`) starts every engine first and waits until all are
ready; then each phase (the warmup, each round of each pass) is sent to all
engines at once and the next starts only when every engine has finished it,
so the engines' rounds overlap as on a fleet under N times the load. Each
engine gets the whole load shape and prompt set. The records come back to
the coordinator, which merges them (`omnicli.benchmark.engines`).

Plain Ray actors, no Ray Data: the work is a few long phases, not a stream
of rows. A bench engine is never restarted (a fresh engine mid-run would
measure cold caches); a dead engine is reported with its error instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omnicli.benchmark.engines import EnginePass, EnginesPass
from omnicli.benchmark.session import BenchPlan, PassResult, ProfileRun, RoundResult, run_round, utc_now, warmup_phase
from omnicli.driver import STOP_GRACE_S, LoadShape, Prompt
from omnicli.engine.request import EngineDead, EngineLike
from omnicli.scaleout.cluster import EngineResources

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

CLOSE_TIMEOUT_S = 60.0


class RayEngineStartError(RuntimeError):
    """An engine could not start on its worker; the run ends before any round."""


@dataclass
class PhaseOutcome:
    """What one engine returns for one phase: its round, or why the engine stopped serving."""

    result: RoundResult | None = None
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.error is not None or (self.result is not None and self.result.complete)


class BenchWorker:
    """A Ray actor's body: one engine built from the resolved profile, driven a phase at a time."""

    def __init__(self, resolved: ResolvedProfile, index: int,
                 start_engine: Callable[[ResolvedProfile, int], Awaitable[EngineLike]] | None = None):
        self.resolved = resolved
        self.index = index
        self.start_engine = start_engine  # (resolved profile, engine index) -> engine; the real Engine by default
        self.engine: EngineLike | None = None
        self._stopping = False
        self._stop: asyncio.Event | None = None
        self._progress = (0, 0, 0.0)

    async def start(self) -> dict:
        """Starts the engine; the facts the report needs, or `error` when it could not start."""
        import ray

        facts: dict = {"engine": self.index, "node": ray.get_runtime_context().get_node_id(), "error": None}
        try:
            if self.start_engine is not None:
                self.engine = await self.start_engine(self.resolved, self.index)
            else:
                from omnicli.engine.backends import start_engine  # the engine (vLLM) is imported in the actor only

                self.engine = await start_engine(self.resolved)
        except Exception as exc:
            facts["error"] = f"{type(exc).__name__}: {exc}"
            return facts
        from omnicli.benchmark.report import machine_facts

        device = self.engine.device
        facts.update(
            model=self.engine.model_name, device=device, sample_rate=int(self.engine.sample_rate),
            machine=machine_facts(device),  # this node's, not the coordinator's
        )
        return facts

    async def phase(self, prompts: Sequence[Prompt], shape: LoadShape, id_prefix: str, grace_s: float) -> PhaseOutcome:
        self._stop = asyncio.Event()
        if self._stopping:
            self._stop.set()
        self._progress = (0, 0, 0.0)
        try:
            result = await run_round(
                self.engine, prompts, shape, id_prefix=f"e{self.index}-{id_prefix}", on_done=self._count,
                stop=self._stop, grace_s=grace_s,
            )
        except EngineDead as exc:
            return PhaseOutcome(error=str(exc))
        for rec in result.records:  # the coordinator holds the prompts; audio is not kept by a Ray bench
            rec.prompt = None
            rec.pcm = None
        return PhaseOutcome(result=result)

    def _count(self, record) -> None:
        done, failed, audio_s = self._progress
        self._progress = (done + 1, failed + (record.error is not None), audio_s + record.audio_duration)

    async def progress(self) -> tuple[int, int, float]:
        """(finished, failed, audio seconds) of the phase in progress."""
        return self._progress

    async def stop(self) -> None:
        """Ends the phase in progress like a local Ctrl-C (nothing more submitted, a grace for requests in flight)."""
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    async def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            await engine.close()


class RayBenchObserver:
    """Progress hooks of a Ray bench; the command renders them. All optional."""

    def engines_starting(self, count: int, run: ProfileRun) -> None: ...
    def engine_ready(self, facts: dict) -> None: ...
    def phase_start(self, description: str, total: int) -> None: ...
    def phase_progress(self, done: int, failed: int, audio_seconds: float) -> None: ...
    def phase_end(self) -> None: ...
    def engines_closing(self) -> None: ...
    def warning(self, message: str) -> None: ...


def _actor_error(exc: BaseException) -> str:
    """The cause of a Ray task failure in one line (a RayTaskError carries the worker's traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"


@dataclass
class RayBench:
    """Runs `plan` for one profile on `resources.engines` engines of the connected Ray cluster.

    `stop` (a threading.Event, set from any thread) winds the run down as a
    local Ctrl-C does: engines stop submitting, requests in flight get
    `grace_s`, the phase is dropped (`unfinished` names it), engines close.
    Completed passes stay in `results`; `engine_error` says which engine
    failed when one did (the run then stops after that phase).
    """

    ray: Any  # the `ray` module, connected
    run_spec: ProfileRun
    prompts: Sequence[Prompt]
    plan: BenchPlan
    resources: EngineResources
    observer: RayBenchObserver = field(default_factory=RayBenchObserver)
    grace_s: float = STOP_GRACE_S
    poll_s: float = 0.25
    start_engine: Callable[[Any, int], Awaitable[Any]] | None = None  # see BenchWorker

    def __post_init__(self) -> None:
        if not self.prompts:
            raise ValueError("no prompts to benchmark")
        self.stop = threading.Event()
        self.results: list[EnginesPass] = []
        self.unfinished: str | None = None
        self.engine_error: str | None = None
        self.facts: list[dict] = []

    @property
    def nodes(self) -> int:
        return len({f["node"] for f in self.facts})

    def actor_options(self) -> dict:
        # Never restarted or retried: a replaced engine would be measured cold, mid-pass.
        return {**self.resources.actor_options(), "max_restarts": 0, "max_task_retries": 0}

    def run(self) -> list[EnginesPass]:
        if self.stop.is_set():
            return self.results
        actor_class = self.ray.remote(**self.actor_options())(BenchWorker)
        actors = [actor_class.remote(self.run_spec.profile, i, self.start_engine) for i in range(self.resources.engines)]
        try:
            self._start(actors)
            if not self.stop.is_set():
                self._measure(actors)
        finally:
            self._close(actors)
        return self.results

    # --- phases ----------------------------------------------------------------

    def _start(self, actors: list) -> None:
        self.observer.engines_starting(len(actors), self.run_spec)
        refs = [a.start.remote() for a in actors]
        self._wait(refs, actors, abandon_on_stop=True)
        if self.stop.is_set():
            return  # engines still starting are ended by _close
        facts, failed = [], []
        for index, ref in enumerate(refs):
            try:
                got = self.ray.get(ref)
            except Exception as exc:  # the actor died (or could not be placed) before answering
                got = {"engine": index, "node": None, "error": _actor_error(exc)}
            facts.append(got)
            if got["error"] is not None:
                failed.append(got)
            else:
                self.observer.engine_ready(got)
        self.facts = facts
        if failed:
            lines = [f"engine {f['engine']} (node {f['node'] or '?'}) could not start: {f['error']}" for f in failed]
            raise RayEngineStartError("; ".join(lines))

    def _measure(self, actors: list) -> None:
        label = self.run_spec.label
        warm_counts = [(0, 0)] * len(actors)
        warm = warmup_phase(self.plan, self.prompts)
        if warm is not None:
            outcomes = self._phase(actors, f"{label} warmup", warm[0], warm[1], "warmup")
            if outcomes is None:
                return
            if self._note_errors(outcomes):
                return
            warm_counts = [(len(o.result.records), sum(1 for r in o.result.records if not r.ok)) for o in outcomes]
            failed = sum(f for _, f in warm_counts)
            if failed:
                self.observer.warning(f"{failed} warmup request(s) failed across the engines")
        prompts_ref = self.ray.put(self.prompts)  # shipped once, read by every engine
        for shape in self.plan.shapes:
            started_at = utc_now()
            rounds: list[list[RoundResult]] = [[] for _ in actors]
            errors: list[str | None] = [None] * len(actors)
            for r in range(self.plan.rounds):
                desc = f"{label} {shape.label}" + (f" round {r + 1}/{self.plan.rounds}" if self.plan.rounds > 1 else "")
                outcomes = self._phase(actors, desc, prompts_ref, shape, f"{shape.label}-r{r}", count=len(self.prompts))
                if outcomes is None:
                    return
                for i, o in enumerate(outcomes):
                    if o.error is not None:
                        errors[i] = o.error
                    else:
                        rounds[i].append(o.result)
                if any(errors):
                    break
            self._add_pass(shape, started_at, rounds, errors, warm_counts)
            if self._note_errors([PhaseOutcome(error=e) if e else PhaseOutcome() for e in errors]):
                return
            warm_counts = [(0, 0)] * len(actors)  # only the first pass follows the warmup

    def _add_pass(self, shape, started_at, rounds, errors, warm_counts) -> None:
        engines = []
        for i, facts in enumerate(self.facts):
            result = None
            if errors[i] is None:
                result = PassResult(
                    profile=self.run_spec, shape=shape, rounds=rounds[i], sample_rate=facts["sample_rate"],
                    model=facts["model"], device=facts["device"], started_at=started_at,
                    num_prompts=len(self.prompts), warmup_requests=warm_counts[i][0], warmup_failed=warm_counts[i][1],
                )
            engines.append(EnginePass(engine=i, node=facts["node"], result=result, error=errors[i], machine=facts.get("machine")))
        passed = EnginesPass(self.run_spec, shape, engines)
        if passed.healthy:
            self.results.append(passed)
        else:
            self.unfinished = passed.label  # no engine finished it: nothing to report

    def _note_errors(self, outcomes: list[PhaseOutcome]) -> bool:
        errors = [f"engine {i}: {o.error}" for i, o in enumerate(outcomes) if o.error is not None]
        if errors:
            self.engine_error = "; ".join(errors)
        return bool(errors)

    def _phase(self, actors, description, prompts, shape, id_prefix, *, count: int | None = None) -> list[PhaseOutcome] | None:
        """One phase on every engine at once; None when a stop cut it short (it is then `unfinished`)."""
        if self.stop.is_set():
            return None
        total = (count if count is not None else len(prompts)) * len(actors)
        self.observer.phase_start(description, total)
        self.unfinished = description  # until it completes
        try:
            refs = [a.phase.remote(prompts, shape, id_prefix, self.grace_s) for a in actors]
            self._wait(refs, actors, progress=True)
            outcomes = []
            for ref in refs:
                try:
                    outcomes.append(self.ray.get(ref))
                except Exception as exc:  # the actor process died: its engine with it
                    outcomes.append(PhaseOutcome(error=f"the engine's Ray actor died: {_actor_error(exc)}"))
        finally:
            self.observer.phase_end()
        if self.stop.is_set() or not all(o.complete for o in outcomes):
            return None
        self.unfinished = None
        return outcomes

    def _wait(self, refs: list, actors: list, *, progress: bool = False, abandon_on_stop: bool = False) -> None:
        """Until every ref is ready; passes a stop on to the engines and polls their progress.

        `abandon_on_stop`: return at once on a stop (engine start-up: nothing to wait for).
        """
        pending, stop_sent = list(refs), False
        while pending:
            _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=self.poll_s)
            if self.stop.is_set() and abandon_on_stop:
                return
            if self.stop.is_set() and not stop_sent:
                for a in actors:
                    a.stop.remote()
                stop_sent = True
            if progress:
                self._poll_progress(actors)

    def _poll_progress(self, actors: list) -> None:
        done = failed = 0
        audio = 0.0
        for ref in [a.progress.remote() for a in actors]:
            try:
                d, f, s = self.ray.get(ref, timeout=self.poll_s * 4)
            except Exception:  # a dead or busy actor: its count stays where it was
                continue
            done, failed, audio = done + d, failed + f, audio + s
        self.observer.phase_progress(done, failed, audio)

    def _close(self, actors: list) -> None:
        self.observer.engines_closing()
        # Engines stopped while still starting have nothing to close cleanly: their actors are killed.
        refs = [a.close.remote() for a in actors] if self.facts else []
        try:
            ready = self.ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)[0] if refs else []
            for ref in ready:
                try:
                    self.ray.get(ref)
                except Exception as exc:  # never hide the run's own error behind a close failure
                    self.observer.warning(f"closing an engine failed: {_actor_error(exc)}")
        finally:
            for a in actors:
                try:
                    self.ray.kill(a)  # its process, and with it any engine process it still has
                except Exception:
                    pass

    def ray_facts(self, address: str | None) -> dict:
        """The result file's `ray` entry."""
        r = self.resources
        return {
            "address": address, "engines": r.engines, "gpus_per_engine": r.gpus_per_engine,
            "cpus_per_engine": r.cpus_per_engine, "nodes": self.nodes,
        }
