"""Stage 1: the codec generation loop on its own thread.

The engine posts events (request opened, chunk ready, request cancelled)
into a thread-safe inbox; each cycle of the loop applies every waiting
event to the `CodecScheduler`, resets the slots the plan says were freed,
retires what needs no compute (bare terminals, oversized chunks), runs the
planned step on the `CodecRunner` and hands PCM back through
`deliver(request_id, pcm, is_last, error)` (the engine's `OutputRouter`,
thread-safe). A step that raises is re-run one row at a time, so only the
request whose chunk causes the error fails. Then it waits as the
coalescing policy says:

- `fixed`: inside a coalescing window, sleeps in ticks of `poll_s` (1 ms)
  and re-evaluates after each tick (arrivals do not wake it); when idle,
  waits on the inbox at most 50 ms at a time.
- `idle_wait`: inside a window, blocks on the inbox until an arrival or the
  window's end; when nothing is runnable, blocks on the inbox until an event.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import Chunk, CodecScheduler, Row

if TYPE_CHECKING:
    from omnicli.engine.windowed import WindowedRunner
    from omnicli.profile.schema import CodecStageConfig

log = logging.getLogger(__name__)

Deliver = Callable[[str, np.ndarray, bool, "str | None"], None]
Policy = Literal["fixed", "idle_wait"]
FIXED_POLL_S = 0.001  # the `fixed` policy's polling period inside a window
FIXED_IDLE_POLL_S = 0.05  # ... and when idle (an arrival wakes it anyway; this only bounds the wake-ups)

_OPEN, _CHUNK, _CANCEL, _STOP = "open", "chunk", "cancel", "stop"
# What the engine posts: (kind, request id) for open/cancel, (_CHUNK, Chunk), (_STOP, None).
Event = tuple[str, "str | Chunk | None"]
_NO_AUDIO = np.zeros(0, np.float32)


@dataclass(frozen=True)
class Wait:
    """What the loop does after a cycle: sleep `seconds`, or wait on the inbox up to `seconds` (None: forever)."""

    seconds: float | None
    on_inbox: bool


class CodecStage:
    def __init__(
        self,
        runner: CodecRunner | WindowedRunner,
        scheduler: CodecScheduler,
        deliver: Deliver,
        *,
        policy: Policy = "fixed",
        threads: int = 1,
        pad_tail_frames: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        poll_s: float = FIXED_POLL_S,
    ) -> None:
        self.runner = runner
        self.scheduler = scheduler
        self._deliver = deliver
        self._policy = policy
        self._threads = threads
        self._pad_tail_frames = pad_tail_frames
        self._clock = clock
        self._poll_s = poll_s
        self._inbox: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="omni-codec-stage", daemon=True)
        self.steps = 0
        self.rows = 0
        self.frames = 0
        self.compute_s = 0.0  # inside CodecRunner.execute
        self.busy_s = 0.0  # inside cycles that ran a step (compute plus scheduling, delivery, bookkeeping)
        self.failure: BaseException | None = None

    @classmethod
    def from_config(
        cls, runner: CodecRunner | WindowedRunner, scheduler: CodecScheduler, deliver: Deliver, cfg: CodecStageConfig
    ) -> CodecStage:
        """The stage as the profile's codec section sets it up (validated there, not here)."""
        return cls(
            runner,
            scheduler,
            deliver,
            policy=cfg.generation_coalescing_policy,
            threads=cfg.threads,
            pad_tail_frames=cfg.codec_chunk_frames if cfg.codec_pad_tail else 0,
        )

    # -- called from the engine's thread ----------------------------------
    def start(self) -> None:
        self._thread.start()

    def open(self, request_id: str) -> None:
        self._inbox.put((_OPEN, request_id))

    def submit(self, request_id: str, codes: np.ndarray, is_last: bool) -> None:
        self._inbox.put((_CHUNK, Chunk(request_id, codes, is_last, self._clock())))

    def cancel(self, request_id: str) -> None:
        self._inbox.put((_CANCEL, request_id))

    def close(self, timeout: float = 10.0) -> None:
        self._inbox.put((_STOP, None))
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the loop ------------------------------------------------------------
    def _run(self) -> None:
        torch.set_num_threads(self._threads)
        try:
            while not self._stopping:
                self._wait(self.cycle())
        except BaseException as exc:  # reported by the engine; requests waiting get errors
            log.exception("codec stage crashed")
            self.failure = exc

    def cycle(self) -> Wait:
        """One pass: apply waiting events, retire, run at most one step, say how to wait."""
        self._drain()
        if self._stopping:
            return Wait(0.0, False)
        t0 = self._clock()
        plan = self.scheduler.schedule(t0)
        for slot in plan.freed_slots:  # before the step: it may hand them to new requests
            self.runner.reset_slot(slot)
        for r in plan.retired:
            self._deliver(r.request_id, _NO_AUDIO, True, r.error)
        if plan.rows:
            self._execute(plan.rows)
            self.busy_s += self._clock() - t0
            return Wait(0.0, False)
        if plan.wait_s is not None:  # inside a coalescing window
            if self._policy == "fixed":
                return Wait(min(plan.wait_s, self._poll_s), False)
            return Wait(plan.wait_s, True)
        return Wait(FIXED_IDLE_POLL_S, True) if self._policy == "fixed" else Wait(None, True)

    def _wait(self, wait: Wait) -> None:
        if wait.seconds == 0:
            return
        if not wait.on_inbox and wait.seconds is not None:  # a sleep always has a length
            time.sleep(wait.seconds)
            return
        try:
            self._apply(self._inbox.get(timeout=wait.seconds))
        except queue.Empty:
            pass

    def _drain(self) -> None:
        while not self._stopping:
            try:
                self._apply(self._inbox.get_nowait())
            except queue.Empty:
                return

    def _apply(self, event: Event) -> None:
        kind, payload = event
        if kind == _STOP:
            self._stopping = True
        elif isinstance(payload, Chunk):  # _CHUNK
            self.scheduler.add_chunk(payload)  # stale chunks of ended requests are dropped
        elif isinstance(payload, str):
            if kind == _OPEN:
                self.scheduler.open(payload)
            elif kind == _CANCEL:
                self.scheduler.cancel(payload)  # a freed slot is reset when the next plan names it

    def _execute(self, rows: list[Row]) -> None:
        try:
            self._run_step(rows)
        except Exception as exc:
            if len(rows) == 1:
                self._fail(rows[0], exc)
                return
            # Find the culprit: re-run the rows one at a time. A failed step
            # advanced no slot (ring runner: its partial ring writes are
            # rewritten with the same positions by the re-run; windowed runner:
            # it commits slot state only after the whole step succeeded), so
            # the others lose nothing.
            log.warning(
                "codec step of %d rows failed (%s: %s); re-running its rows one at a time",
                len(rows),
                type(exc).__name__,
                exc,
            )
            for row in rows:
                try:
                    self._run_step([row])
                except Exception as row_exc:
                    self._fail(row, row_exc)

    def _run_step(self, rows: list[Row]) -> None:
        pad = self._pad_tail_frames if any(r.chunk.is_last for r in rows) else 0
        t0 = self._clock()
        out = self.runner.execute([r.slot for r in rows], [r.chunk.codes for r in rows], pad_to_frames=pad,
                                  last=[r.chunk.is_last for r in rows])
        self.compute_s += self._clock() - t0
        self.steps += 1
        self.rows += len(rows)
        self.frames += sum(r.chunk.frames for r in rows)
        for r, pcm in zip(rows, out):
            self._deliver(r.request_id, pcm.astype(np.float32, copy=False), r.chunk.is_last, None)
            self.scheduler.complete(r.request_id)

    def _fail(self, row: Row, exc: Exception) -> None:
        log.error("codec step failed for request %s: %s: %s", row.request_id, type(exc).__name__, exc)
        self.scheduler.complete(row.request_id, failed=True)
        self._deliver(row.request_id, _NO_AUDIO, True, f"codec step failed: {type(exc).__name__}: {exc}")
