"""`omni synth --ray`: the rows a synth run has to do, through a pool of engine actors.

    coordinator (`omni synth --ray`)            actor (one Engine each, on any node)
      holds OUT's lock, plans the resume          checks the coordinator's probe file in OUT
      writes a probe file into OUT                starts its Engine from the coordinator's profile,
      rows -> Ray Data, one JSON string each        writes the engine's run files into OUT
      polls the board every POLL_S:               per batch of rows: `SynthRun.drive_rows`
        appends new results to results.jsonl        (wav written atomically into OUT), and
        feeds the progress bar                      reports each result to the board at once
      writes summary.json (`omnicli.synth`)       a dead engine: the actor exits, Ray restarts
                                                    it and retries its batch (capped)

The board (`ProgressBoard`, a CPU-less actor) is how rows reach the coordinator one
by one: rows returned by a Ray Data UDF arrive in batches, seconds late. It
keeps the first result of each utterance, so a batch retried after an engine
death neither redoes nor re-records the rows it had finished. The coordinator is the
only writer of results.jsonl and summary.json; resume needs no Ray Data
checkpoint, since results.jsonl is the checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.atomic import JsonlAppender
from omnicli.driver import STOP_GRACE_S
from omnicli.engine.request import EngineDead, EngineError
from omnicli.manifest import ManifestRow
from omnicli.retention import Retainer
from omnicli.runtime.cluster import EngineResources, RayCluster
from omnicli.runtime.storage import StorageNotShared, check_probe, remove_probe, remove_stale_probes, write_probe
from omnicli.synth.plan import RESULTS
from omnicli.synth.results import SynthResult
from omnicli.synth.run import SynthRun

if TYPE_CHECKING:
    from omnicli.engine.request import EngineLike
    from omnicli.profile import ResolvedProfile

POLL_S = 0.25  # how often the coordinator collects finished rows, and actors look for a stop
STOP_SLACK_S = 10.0  # after a stop, beyond the grace period: how long the coordinator waits for actors to return
ROW = "row"  # the one column of the dataset: each manifest row as a JSON string (Arrow would coerce all-None columns)


# -- rows over the wire ------------------------------------------------------------------
_PATH_FIELDS = ("prompt_wav", "gt_wav", "source")


def row_to_json(row: ManifestRow) -> str:
    """Every field of the row (a field added to ManifestRow travels without a change here)."""
    d = dataclasses.asdict(row)
    for key in _PATH_FIELDS:
        d[key] = None if d[key] is None else str(d[key])
    return json.dumps(d, ensure_ascii=False)


def row_from_json(text: str) -> ManifestRow:
    d = json.loads(text)
    for key in _PATH_FIELDS:
        d[key] = None if d[key] is None else Path(d[key])
    return ManifestRow(**d)


# -- the board: finished rows and events, from actors to the coordinator ---------------------
class Event:
    """What an actor tells the coordinator besides results (`ProgressBoard.event`)."""

    STARTED = "started"  # an engine is ready: message says where and how fast
    NOT_SHARED = "not_shared"  # a worker cannot see OUT: the run stops, exit 2
    START_FAILED = "start_failed"  # an engine could not start: the run ends, exit 3
    ENGINE_DIED = "engine_died"  # an engine died serving: its actor exits and is restarted
    OUTPUT = "output"  # OUT cannot be written (disk full): the run stops, exit 4
    WROTE = "wrote"  # an engine wrote a run file into OUT (vLLM-Omni's deploy overlay): message is its path


class ProgressBoard:
    """Finished rows and events posted by actors, collected by the coordinator (`take`).

    Pure bookkeeping (no Ray): `RaySynthRun` runs it as a Ray actor with no CPU.
    The first result of an utterance counts; a retried batch reporting it again
    is ignored.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._new: list[str] = []  # results (JSON lines) not yet taken by the coordinator
        self._events: list[tuple[str, str]] = []
        self._pending: set[str] = set()  # cut off in flight by a stop or an engine death
        self._stop = False

    def report(self, result_line: str) -> bool:
        """Posts one finished row (`SynthResult.to_line()`); False when its utt was reported before."""
        utt = json.loads(result_line)["utt"]
        if utt in self._seen:
            return False
        self._seen.add(utt)
        self._new.append(result_line)
        return True

    def finished(self, utts: Sequence[str]) -> list[str]:
        """Those of `utts` already reported (a retried batch skips them)."""
        return [u for u in utts if u in self._seen]

    def left_pending(self, utts: Sequence[str]) -> None:
        self._pending.update(utts)

    def event(self, kind: str, message: str) -> None:
        self._events.append((kind, message))

    def take(self) -> tuple[list[str], list[tuple[str, str]]]:
        """Results and events posted since the last call."""
        new, events = self._new, self._events
        self._new, self._events = [], []
        return new, events

    def pending(self) -> list[str]:
        return sorted(self._pending - self._seen)

    def request_stop(self) -> None:
        self._stop = True

    def stopping(self) -> bool:
        return self._stop


# -- the actor ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActorSpec:
    """What every engine actor needs, sent once by the coordinator (must pickle)."""

    resolved: ResolvedProfile  # the same settings, digest and platform on every node
    out_dir: Path
    probe: Path  # the coordinator's probe file in out_dir (shared storage check)
    concurrency: int = 8
    max_new_tokens: int | None = None
    keep_failed: Path | None = None  # retained audio goes here (must be shared storage too)
    grace_s: float = STOP_GRACE_S


def _start_engine(resolved: ResolvedProfile) -> Awaitable[EngineLike]:
    from omnicli.engine.backends import start_engine

    return start_engine(resolved)


def _exit_process(code: int) -> None:
    """Ends this actor's process at once: Ray restarts the actor and retries its batch."""
    from omnicli.runtime.orphans import terminate_children

    terminate_children(grace_s=1.0)  # what is left of the dead engine (a hung stage's vLLM process)
    os._exit(code)


class SynthActor:
    """One engine for its lifetime, fed batches of rows by Ray Data (`map_batches`).

    A row that fails by itself is reported as a failed row. When the engine
    dies, the actor reports it and exits the process (`die`): Ray restarts
    the actor (a fresh engine) and retries the batch; rows of that batch
    already reported are skipped. The engine is not closed here: when the
    pool ends, Ray ends the actor's process and the engine's orphan guard
    (`omnicli.runtime.orphans`) ends its vLLM process. `start_engine` and `die` are
    for unit tests; Ray Data builds the actor from `spec` and `board` alone.
    """

    def __init__(
        self, spec: ActorSpec, board: Any, *, start_engine: Callable = _start_engine,
        die: Callable[[int], Any] = _exit_process,
    ):
        import ray

        from omnicli.checkpoints import CheckpointMissing
        from omnicli.retention import Retainer

        self.ray = ray
        self.spec = spec
        self.board = board
        self.die = die
        self.host = socket.gethostname()
        try:
            check_probe(spec.probe)
        except StorageNotShared as exc:
            ray.get(board.event.remote(Event.NOT_SHARED, str(exc)))
            raise
        self.retainer = Retainer(spec.keep_failed) if spec.keep_failed is not None else None
        self.loop = asyncio.new_event_loop()  # the engine is bound to the loop it starts on
        self._thread = threading.Thread(target=self.loop.run_forever, name="omni-actor-engine-loop", daemon=True)
        self._thread.start()
        try:
            self.engine = self._on_loop(start_engine(spec.resolved)).result()
        except (EngineError, CheckpointMissing) as exc:  # a node without the checkpoint cannot start one
            ray.get(board.event.remote(Event.START_FAILED, f"on {self.host}: {exc}"))
            raise
        device, seconds = self.engine.device, self.engine.startup_seconds
        ray.get(board.event.remote(Event.STARTED, f"{self.host} ({device}) in {seconds:.1f}s"))
        # What a local run writes beside its rows (the deploy overlay the profile became); every
        # actor writes the same file, atomically, so the last one standing is whole.
        for path in self.engine.write_run_files(spec.out_dir):
            ray.get(board.event.remote(Event.WROTE, str(path)))

    def _on_loop(self, coro) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        rows = [row_from_json(str(text)) for text in batch[ROW]]
        done = set(self.ray.get(self.board.finished.remote([r.utt for r in rows])))
        todo = [r for r in rows if r.utt not in done]
        run, reports = self._on_loop(self._run_batch(todo)).result()
        self.ray.get(reports)  # every result reached the board before the batch counts as done
        if run is not None and run.engine_error:
            self.ray.get(self.board.event.remote(Event.ENGINE_DIED, f"on {self.host}: {run.engine_error}"))
            self.die(1)
        elif run is not None:
            if run.left_pending:
                self.ray.get(self.board.left_pending.remote(run.left_pending))
            if run.output_error:
                self.ray.get(self.board.event.remote(Event.OUTPUT, run.output_error))
        return {"finished": np.array([len(run.results) if run else 0])}

    async def _run_batch(self, rows: list[ManifestRow]) -> tuple[SynthRun | None, list]:
        reports: list = []
        if not rows or await self._stopping():
            return None, reports
        run = SynthRun(
            self.engine, self.spec.out_dir, resolved=self.spec.resolved, concurrency=self.spec.concurrency,
            max_new_tokens=self.spec.max_new_tokens, retainer=self.retainer, grace_s=self.spec.grace_s,
        )

        async def watch_stop() -> None:
            while not await self._stopping():
                await asyncio.sleep(POLL_S)
            run.stop.set()

        watcher = asyncio.create_task(watch_stop())
        try:
            # Fire and forget: the coordinator appends each row as soon as the board has it.
            await run.drive_rows(rows, keep=lambda result: reports.append(self.board.report.remote(result.to_line())))
        finally:
            watcher.cancel()
        return run, reports

    async def _stopping(self) -> bool:
        return bool(await asyncio.wrap_future(self.board.stopping.remote().future()))


# -- the coordinator -------------------------------------------------------------------------------
@dataclass
class RayOutcome:
    """How the actor pool's run ended, beyond the results (set by `RaySynthRun.run`)."""

    started: list[str] = field(default_factory=list)  # where engines started
    restarts: int = 0  # engine deaths that made an actor restart


class RaySynthRun:
    """The coordinator of `omni synth --ray`: the same interface as `SynthRun` to
    `omnicli.synth` and `build_synth_summary` (`omnicli.synth.run.RowRun`: results,
    engine_error, output_error, left_pending, wall_seconds, grace_s, model_name; and
    `stop`), with the engines in Ray actors. OUT is tidied by the caller, before and after.

    Call `run(rows)` with `cluster` open; it blocks. `stop` (a threading.Event,
    set from any thread) stops admitting rows: actors let requests in flight
    finish for `grace_s`, finished rows are kept. `storage_error` is set when
    a worker cannot see OUT.
    """

    def __init__(
        self,
        cluster: RayCluster,
        out_dir: Path,
        *,
        resolved: ResolvedProfile,
        concurrency: int = 8,
        max_new_tokens: int | None = None,
        retainer: Retainer | None = None,
        rows_per_batch: int | None = None,
        on_result: Callable[[SynthResult], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_first_ready: Callable[[], None] | None = None,
        grace_s: float = STOP_GRACE_S,
    ):
        self.cluster = cluster
        self.resources: EngineResources = cluster.resources
        self.out_dir = out_dir
        self.resolved = resolved
        self.concurrency = max(1, concurrency)
        self.max_new_tokens = max_new_tokens
        self.retainer = retainer  # the actors keep the audio in its folder; this one counts it for the summary
        self.rows_per_batch = rows_per_batch  # None: see `batch_size`
        self.on_result = on_result or (lambda _result: None)
        self.on_note = on_note or (lambda _message: None)
        self.on_first_ready = on_first_ready or (lambda: None)  # e.g. start the progress bar: rows flow from now on
        self.grace_s = grace_s
        self.stop = threading.Event()
        self.results: list[SynthResult] = []
        self.engine_error: EngineError | None = None
        self.output_error: str | None = None
        self.storage_error: str | None = None
        self.left_pending: list[str] = []
        self.wall_seconds = 0.0
        self.outcome = RayOutcome()
        self._last_death: str | None = None
        self._first_ready: float | None = None  # perf_counter when the first engine was ready
        self._wrote: set[str] = set()  # run files the actors wrote into OUT

    @property
    def model_name(self) -> str:
        return self.resolved.profile.model  # the engines live in the actors: the profile's family

    def run(self, rows: list[ManifestRow]) -> list[SynthResult]:
        ray = self.cluster.ray
        assert ray is not None, "open the RayCluster first"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_probes(self.out_dir)  # left by a coordinator killed with kill -9
        probe = write_probe(self.out_dir)
        board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        t0 = time.perf_counter()
        failure: list[BaseException] = []
        try:
            spec = ActorSpec(
                resolved=self.resolved, out_dir=self.out_dir.resolve(), probe=probe.resolve(),
                concurrency=self.concurrency, max_new_tokens=self.max_new_tokens,
                keep_failed=self.retainer.directory.resolve() if self.retainer else None, grace_s=self.grace_s,
            )
            if self.cluster.quiet:
                # Our bar is the progress display, and a failed pool is explained in our words
                # (`_explain`): no Ray Data notices or stack traces in between.
                logging.getLogger("ray.data").setLevel(logging.CRITICAL)
            dataset = self._dataset(ray, rows, spec, board)
            consumer = threading.Thread(target=_consume, args=(dataset, failure), name="omni-ray-consumer", daemon=True)
            with JsonlAppender(self.out_dir / RESULTS) as results:
                consumer.start()
                self._follow(ray, board, results, consumer)
                self._collect(ray, board, results)  # the rows posted while the pool wound down
            self.left_pending = ray.get(board.pending.remote())
        finally:
            # From the first engine ready, like a local run's (which starts timing once its engine is up).
            self.wall_seconds = time.perf_counter() - (self._first_ready or t0)
            remove_probe(probe)
            with contextlib.suppress(Exception):  # on a joined cluster it would outlive the run
                ray.kill(board)
        if failure and not self.stop.is_set():
            self._explain(failure[0])
        return self.results

    def batch_size(self, num_rows: int) -> int:
        """Rows per actor call. A batch is what a dead engine's restart redoes, and the
        engine idles at its tail, so: a few times the concurrency, but small enough
        that every engine gets a batch."""
        if self.rows_per_batch:
            return self.rows_per_batch
        engines = self.resources.engines
        return max(1, min(4 * self.concurrency, -(-num_rows // engines)))

    def _dataset(self, ray, rows: list[ManifestRow], spec: ActorSpec, board):
        from ray.data import ActorPoolStrategy

        batch = self.batch_size(len(rows))
        blocks = max(1, -(-len(rows) // batch))
        dataset = ray.data.from_items([{ROW: row_to_json(r)} for r in rows], override_num_blocks=blocks)
        options = self.resources.actor_options()
        with warnings.catch_warnings():
            # The restart caps have no named parameter in Ray Data yet, only **ray_remote_args (deprecated).
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            return dataset.map_batches(
                SynthActor,
                fn_constructor_kwargs={"spec": spec, "board": board},
                batch_size=batch,
                batch_format="numpy",
                compute=ActorPoolStrategy(size=self.resources.engines),
                num_cpus=options.pop("num_cpus"),
                num_gpus=options.pop("num_gpus"),
                **options,  # max_restarts, max_task_retries: an engine that keeps dying ends the run
            )

    def _follow(self, ray, board, results: JsonlAppender, consumer: threading.Thread) -> None:
        """Collects rows while the pool runs; after a stop, waits for the grace period (and a bit)."""
        stop_sent_at: float | None = None
        while consumer.is_alive():
            self._collect(ray, board, results)
            if self.stop.is_set() and stop_sent_at is None:
                board.request_stop.remote()
                stop_sent_at = time.monotonic()
            if stop_sent_at is not None and time.monotonic() - stop_sent_at > self.grace_s + STOP_SLACK_S:
                self.on_note("the actors did not return after the stop: leaving them to Ray's shutdown")
                _no_ray_auto_init()
                return
            consumer.join(POLL_S)

    def _collect(self, ray, board, results: JsonlAppender) -> None:
        lines, events = ray.get(board.take.remote())
        for kind, message in events:  # first: an engine is ready before its first row is done
            self._on_event(kind, message)
        for line in lines:
            result = SynthResult.model_validate_json(line)
            if self.output_error is None:
                try:
                    results.append(result.model_dump(mode="json"))
                except OSError as exc:
                    self._stop_for_output(f"cannot write {self.out_dir / RESULTS}: {exc}")
                    continue  # not recorded: a re-run redoes it
                self.results.append(result)
                if self.retainer is not None:  # an actor kept it: counted here for the summary
                    self.retainer.count(kept=bool(result.retained), error=result.retention_error)
                self.on_result(result)

    def _on_event(self, kind: str, message: str) -> None:
        if kind == Event.STARTED:
            self.outcome.started.append(message)
            if self._first_ready is None:
                self._first_ready = time.perf_counter()
                self.on_first_ready()
            self.on_note(f"engine ready on {message}")
        elif kind == Event.ENGINE_DIED:
            self.outcome.restarts += 1
            self._last_death = message
            self.on_note(f"engine died {message}: Ray restarts its actor and retries its unfinished rows")
        elif kind == Event.START_FAILED:
            self.engine_error = self.engine_error or EngineError(f"an engine could not start {message}")
            self.stop.set()
        elif kind == Event.NOT_SHARED:
            self.storage_error = self.storage_error or message
            self.stop.set()
        elif kind == Event.OUTPUT:
            self._stop_for_output(message)
        elif kind == Event.WROTE and message not in self._wrote:
            self._wrote.add(message)
            self.on_note(f"wrote {message}")

    def _stop_for_output(self, message: str) -> None:
        self.output_error = self.output_error or message
        self.stop.set()

    def _explain(self, exc: BaseException) -> None:
        """The pool failed: say why in our words (a start failure or a crash loop), else Ray's."""
        if self.engine_error or self.storage_error or self.output_error:
            return
        if self._last_death is not None:
            restarts = self.resources.actor_options()["max_restarts"]
            self.engine_error = EngineDead(f"engine died {self._last_death} "
                                           f"(an engine actor is restarted at most {restarts} times)")
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.engine_error = EngineDead(f"the Ray actor pool failed: {type(exc).__name__}: {first}")


def _no_ray_auto_init() -> None:
    """An abandoned pool's thread goes on calling Ray; once Ray is shut down, such a call
    would start a fresh local cluster (Ray's auto-init). Turned off instead: the call fails."""
    os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"
    with contextlib.suppress(ImportError, AttributeError):
        from ray._private import auto_init_hook  # the switch behind RAY_ENABLE_AUTO_CONNECT, read once at import

        auto_init_hook.enable_auto_connect = False


def _consume(dataset, failure: list[BaseException]) -> None:
    """Drives the Ray Data pipeline to its end (the results travel through the board)."""
    try:
        for _ in dataset.iter_batches(batch_size=None):
            pass
    except BaseException as exc:  # reported by the coordinator thread
        failure.append(exc)


def unreachable_head(address: str | None, timeout_s: float = 5.0) -> str | None:
    """Why `--ray-address HOST:PORT` cannot be joined, when nothing answers there; None
    otherwise ('auto', no address, or something listens). Ray itself would retry for
    minutes before giving up on a mistyped address."""
    if not address or address == "auto" or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    host = host.removeprefix("ray://").strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except ValueError:
        return f"--ray-address {address}: expected auto or HOST:PORT"
    except OSError as exc:
        return (f"nothing answers at --ray-address {address} ({exc.strerror or exc}): "
                "start the head with `ray start --head` or check the address")


@contextlib.contextmanager
def keeping_signal_handlers():
    """Restores this process's SIGINT/SIGTERM/SIGHUP handlers after the block: `ray.init`
    replaces SIGTERM's with a plain exit, which would skip the graceful stop and summary."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in saved.items():
                if handler is not None:
                    signal.signal(sig, handler)
