"""Stage 1: the codec generation loop on its own thread.

The engine posts events (request opened, chunk ready, request cancelled)
into a thread-safe inbox; the loop applies them to the `CodecScheduler`,
runs the planned step on the `CodecRunner` and hands PCM back through
`deliver(request_id, pcm, is_last, error)`, which the engine makes
thread-safe for its event loop.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import Chunk, CodecScheduler

log = logging.getLogger(__name__)

Deliver = Callable[[str, np.ndarray, bool, "str | None"], None]
FIXED_POLL_S = 0.001  # the `fixed` policy's polling period inside a window

_OPEN, _CHUNK, _CANCEL, _STOP = "open", "chunk", "cancel", "stop"


class CodecStage:
    def __init__(self, runner: CodecRunner, scheduler: CodecScheduler, deliver: Deliver, *, policy: str = "fixed", threads: int = 1, pad_tail_frames: int = 0):
        if policy not in ("fixed", "idle_wait"):
            raise ValueError(f"generation_coalescing_policy must be 'fixed' or 'idle_wait', got {policy!r}")
        self.runner = runner
        self.scheduler = scheduler
        self._deliver = deliver
        self._policy = policy
        self._threads = threads
        self._pad_tail_frames = pad_tail_frames
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="omni-codec-stage", daemon=True)
        self.steps = 0
        self.rows = 0
        self.frames = 0
        self.compute_s = 0.0
        self.last_progress = time.perf_counter()
        self.failure: BaseException | None = None

    # -- called from the engine's thread ----------------------------------
    def start(self) -> None:
        self._thread.start()

    def open(self, request_id: str) -> None:
        self._inbox.put((_OPEN, request_id))

    def submit(self, request_id: str, codes: np.ndarray, is_last: bool) -> None:
        self._inbox.put((_CHUNK, Chunk(request_id, codes, is_last, time.perf_counter())))

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
    def _apply(self, event) -> bool:
        kind, payload = event
        if kind == _STOP:
            return False
        if kind == _OPEN:
            self.scheduler.open(payload)
        elif kind == _CHUNK:
            self.scheduler.add_chunk(payload)  # stale chunks of ended requests are dropped
        elif kind == _CANCEL:
            self._free(payload)
        return True

    def _free(self, request_id: str) -> None:
        slot = self.scheduler.close(request_id)
        if slot is not None:
            self.runner.reset_slot(slot)

    def _run(self) -> None:
        torch.set_num_threads(self._threads)
        try:
            self._loop()
        except BaseException as exc:  # reported by the engine; requests waiting get errors
            log.exception("codec stage crashed")
            self.failure = exc

    def _loop(self) -> None:
        timeout: float | None = None
        while True:
            try:
                event = self._inbox.get(timeout=timeout) if timeout != 0 else self._inbox.get_nowait()
                if not self._apply(event):
                    return
                while True:  # drain everything already waiting
                    if not self._apply(self._inbox.get_nowait()):
                        return
            except queue.Empty:
                pass
            plan = self.scheduler.schedule(time.perf_counter())
            for request_id, reason, slot in plan.rejected:
                if slot is not None:
                    self.runner.reset_slot(slot)
                self._deliver(request_id, np.zeros(0, np.float32), True, reason)
            if plan.rows:
                self._execute(plan.rows)
                timeout = 0
            elif plan.wait_s is not None:  # coalescing window open
                timeout = min(plan.wait_s, FIXED_POLL_S) if self._policy == "fixed" else plan.wait_s
            else:
                timeout = FIXED_POLL_S * 10 if self._policy == "fixed" else None

    def _execute(self, rows) -> None:
        compute = [(req, chunk) for req, chunk in rows if chunk.frames]
        pcms: dict[str, np.ndarray] = {}
        if compute:
            pad = self._pad_tail_frames if any(c.is_last for _, c in compute) else 0
            t0 = time.perf_counter()
            try:
                out = self.runner.execute([r.slot for r, _ in compute], [c.codes for _, c in compute], pad_to_frames=pad)
            except Exception as exc:  # one bad step fails its own requests only
                log.exception("codec step failed")
                for req, _ in rows:
                    self._free(req.request_id)
                    self._deliver(req.request_id, np.zeros(0, np.float32), True, f"codec step failed: {type(exc).__name__}: {exc}")
                return
            self.compute_s += time.perf_counter() - t0
            self.steps += 1
            self.rows += len(compute)
            self.frames += sum(c.frames for _, c in compute)
            pcms = {req.request_id: pcm for (req, _), pcm in zip(compute, out)}
        self.last_progress = time.perf_counter()
        for req, chunk in rows:
            pcm = pcms.get(req.request_id, np.zeros(0, np.float32))
            if chunk.is_last:
                self._free(req.request_id)
            self._deliver(req.request_id, pcm, chunk.is_last, None)
