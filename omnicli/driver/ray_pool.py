"""`omni bench --ray`: N engines, one per Ray actor, running the same passes at the same time.

`RayPool` is the Ray side of the engine-pool seam (omnicli.driver.pool):
`BenchSession` starts every engine first and waits until all are ready;
then each phase (the warmup, each round of each pass) is sent to all
engines at once and the next starts only when every engine has finished it,
so the engines' rounds overlap as on a fleet under N times the load. Each
engine gets the whole load shape and prompt set. The records come back to
this process, where each pass is merged (`omnicli.benchmark.engines`).

Plain Ray actors, no Ray Data: the work is a few long phases, not a stream
of rows. A bench engine is never restarted (a fresh engine mid-run would
measure cold caches); a dead engine is reported with its error instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from omnicli.driver import LoadShape, Prompt, RequestRecord
from omnicli.driver.pool import EngineFacts, EngineStartError, OnProgress, OnRecord, RoundResult, run_round
from omnicli.engine.request import EngineDead, EngineLike
from omnicli.runtime.cluster import EngineResources

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

CLOSE_TIMEOUT_S = 60.0
WorkerStart = Callable[["ResolvedProfile", int], Awaitable[EngineLike]]  # (resolved profile, engine index) -> engine


class BenchWorker:
    """A Ray actor's body: one engine built from the resolved profile, driven a phase at a time."""

    def __init__(self, resolved: ResolvedProfile, index: int,
                 start_engine: WorkerStart | None = None):
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
        from omnicli.runtime.machine import machine_facts

        device = self.engine.device
        facts.update(
            model=self.engine.model_name, device=device, sample_rate=int(self.engine.sample_rate),
            machine=machine_facts(device),  # this node's, not the coordinator's
        )
        return facts

    async def phase(self, prompts: Sequence[Prompt], shape: LoadShape, id_prefix: str, grace_s: float) -> RoundResult:
        """One round on this engine; an engine that stopped serving gives a round with its `error`."""
        self._stop = asyncio.Event()
        if self._stopping:
            self._stop.set()
        self._progress = (0, 0, 0.0)
        if self.engine is None:
            return RoundResult(records=[], error="the engine is not started")
        try:
            result = await run_round(
                self.engine, prompts, shape, id_prefix=f"e{self.index}-{id_prefix}", on_done=self._count,
                stop=self._stop, grace_s=grace_s,
            )
        except EngineDead as exc:
            return RoundResult(records=[], error=str(exc))
        for rec in result.records:  # the coordinator holds the prompts; audio is not kept by a Ray bench
            rec.prompt = None
            rec.pcm = None
        return result

    def _count(self, record: RequestRecord) -> None:
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


def _actor_error(exc: BaseException) -> str:
    """The cause of a Ray task failure in one line (a RayTaskError carries the worker's traceback)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"


class RayPool:
    """The engines of one profile, one per actor of the connected Ray cluster (`resources.engines` of them).

    A stop (the session's event, set on its loop) winds a phase down as a local
    Ctrl-C does: the engines stop submitting and requests in flight get the
    grace; during start-up the pool stops waiting and its actors are killed.
    """

    per_engine = True
    graceful_start = True  # this process only waits on Ray: a signal during start-up can stop gracefully

    def __init__(self, ray: ModuleType, profile: ResolvedProfile, resources: EngineResources, *,
                 start_engine: WorkerStart | None = None, poll_s: float = 0.25):
        self.ray = ray
        self.profile = profile
        self.resources = resources
        self.start_engine = start_engine  # see BenchWorker
        self.poll_s = poll_s
        self.actors: list[Any] = []  # Ray actor handles
        self.facts: list[EngineFacts] = []
        self._shipped: tuple[Sequence[Prompt], Any] | None = None  # the prompts put in Ray's object store once

    @classmethod
    def factory(cls, ray: ModuleType, resources: EngineResources, *, start_engine: WorkerStart | None = None,
                poll_s: float = 0.25) -> Callable[[ResolvedProfile], RayPool]:
        return lambda profile: cls(ray, profile, resources, start_engine=start_engine, poll_s=poll_s)

    def actor_options(self) -> dict:
        # Never restarted or retried: a replaced engine would be measured cold, mid-pass.
        return {**self.resources.actor_options(), "max_restarts": 0, "max_task_retries": 0}

    async def start(self, stop: asyncio.Event) -> list[EngineFacts]:
        actor_class = self.ray.remote(**self.actor_options())(BenchWorker)
        self.actors = [actor_class.remote(self.profile, i, self.start_engine) for i in range(self.resources.engines)]
        refs = [a.start.remote() for a in self.actors]
        if not await self._wait(refs, stop, abandon_on_stop=True):
            return []  # engines still starting are ended by close()
        facts: list[dict] = []
        failed: list[dict] = []
        for index, ref in enumerate(refs):
            try:
                got = self.ray.get(ref)
            except Exception as exc:  # the actor died (or could not be placed) before answering
                got = {"engine": index, "node": None, "error": _actor_error(exc)}
            (failed if got["error"] is not None else facts).append(got)
        if failed:
            lines = [f"engine {f['engine']} (node {f['node'] or '?'}) could not start: {f['error']}" for f in failed]
            raise EngineStartError(self.profile.name, message="; ".join(lines))
        self.facts = [
            EngineFacts(
                engine=f["engine"],
                model=f["model"],
                device=f["device"],
                sample_rate=f["sample_rate"],
                node=f["node"],
                machine=f.get("machine"),
            )
            for f in facts
        ]
        return self.facts

    async def phase(
        self, prompts: Sequence[Prompt], shape: LoadShape, id_prefix: str, *, keep_pcm: bool, on_done: OnRecord,
        on_progress: OnProgress, stop: asyncio.Event, grace_s: float,
    ) -> list[RoundResult]:
        """The round on every engine; a Ray bench keeps no audio (`keep_pcm` is not honoured)."""
        refs = [a.phase.remote(self._ship(prompts), shape, id_prefix, grace_s) for a in self.actors]
        await self._wait(refs, stop, on_progress=on_progress)
        results = []
        for ref in refs:
            try:
                results.append(self.ray.get(ref))
            except Exception as exc:  # the actor process died: its engine with it
                results.append(RoundResult(records=[], error=f"the engine's Ray actor died: {_actor_error(exc)}"))
        return results

    def _ship(self, prompts: Sequence[Prompt]) -> Any:
        """The measured prompts go to the object store once, read by every engine; others (warmup) by value."""
        if self._shipped is None:
            self._shipped = (prompts, self.ray.put(prompts))
        return self._shipped[1] if prompts is self._shipped[0] else prompts

    async def _wait(self, refs: list, stop: asyncio.Event, *, on_progress: OnProgress | None = None,
                    abandon_on_stop: bool = False) -> bool:
        """Until every ref is ready; passes a stop on to the engines and polls their progress.

        `abandon_on_stop`: return False at once on a stop (engine start-up: nothing to wait for).
        """
        pending, stop_sent = list(refs), False
        while pending:
            _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=0)
            if stop.is_set() and abandon_on_stop:
                return False
            if stop.is_set() and not stop_sent:
                for a in self.actors:
                    a.stop.remote()
                stop_sent = True
            if on_progress is not None:
                self._poll_progress(on_progress)
            if pending and stop.is_set():
                await asyncio.sleep(self.poll_s)
            elif pending:
                try:  # wakes at once on a stop (a signal sets it on this loop)
                    await asyncio.wait_for(stop.wait(), self.poll_s)
                except asyncio.TimeoutError:
                    pass
        return True

    def _poll_progress(self, on_progress: OnProgress) -> None:
        done = failed = 0
        audio = 0.0
        for ref in [a.progress.remote() for a in self.actors]:
            try:
                d, f, s = self.ray.get(ref, timeout=self.poll_s * 4)
            except Exception:  # a dead or busy actor: its count stays where it was
                continue
            done, failed, audio = done + d, failed + f, audio + s
        on_progress(done, failed, audio)

    def write_run_files(self, run_dir: Path) -> list[Path]:
        return []  # the engines run on the cluster's nodes: files of theirs would land there, not here

    async def close(self) -> None:
        actors, self.actors = self.actors, []
        # Engines stopped while still starting have nothing to close cleanly: their actors are killed.
        refs = [a.close.remote() for a in actors] if self.facts else []
        errors = []
        try:
            ready = self.ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)[0] if refs else []
            for ref in ready:
                try:
                    self.ray.get(ref)
                except Exception as exc:  # reported after every actor is gone
                    errors.append(_actor_error(exc))
        finally:
            for a in actors:
                try:
                    self.ray.kill(a)  # its process, and with it any engine process it still has
                except Exception:
                    pass
        if errors:
            raise RuntimeError("; ".join(errors))


def ray_facts(address: str | None, resources: EngineResources, facts: Sequence[EngineFacts]) -> dict:
    """The result file's `ray` entry."""
    return {
        "address": address, "engines": resources.engines, "gpus_per_engine": resources.gpus_per_engine,
        "cpus_per_engine": resources.cpus_per_engine, "nodes": len({f.node for f in facts}),
    }
