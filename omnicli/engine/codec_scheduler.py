"""Stage 1 scheduling policy: which ready chunks run in the next codec step.

Pure logic with an injected clock, no threads and no tensors, so every rule
is unit-testable:

- Slots: a request takes one of `num_slots` slots with its first executed
  chunk and keeps it until it ends (finish, error or cancel). With no free
  slot a new request simply waits.
- Atomic chunks: a chunk runs whole under the step budget (frames) or waits
  intact; a chunk larger than the whole budget ends its request with one
  error.
- Coalescing: with fewer ready requests than `min_batch` while more could
  become ready, wait for arrivals until `max_wait_s` after the first waiting
  arrival (never extended by later arrivals); with fewer active requests
  than the target, or a zero wait, dispatch at once.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Chunk:
    request_id: str
    codes: np.ndarray  # (frames, K); may be empty for a bare terminal message
    is_last: bool
    arrival: float

    @property
    def frames(self) -> int:
        return int(len(self.codes))


@dataclass
class RequestSlot:
    request_id: str
    slot: int | None = None
    ready: deque = field(default_factory=deque)


@dataclass
class StepPlan:
    rows: list[tuple[RequestSlot, Chunk]] = field(default_factory=list)
    rejected: list[tuple[str, str, int | None]] = field(default_factory=list)  # (request, reason, freed slot)
    wait_s: float | None = None  # when nothing runs: seconds until the window closes (None: idle)


class CodecScheduler:
    def __init__(self, num_slots: int, budget_frames: int, min_batch: int = 1, max_wait_ms: float = 0.0):
        if not 1 <= min_batch <= num_slots:
            raise ValueError(f"generation_min_batch_size must be between 1 and the slot count ({num_slots}), got {min_batch}")
        if not math.isfinite(max_wait_ms) or max_wait_ms < 0:
            raise ValueError(f"generation_max_wait_ms must be a finite number >= 0, got {max_wait_ms}")
        self.num_slots = num_slots
        self.budget = budget_frames
        self.min_batch = min_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.requests: dict[str, RequestSlot] = {}
        self.free_slots = list(range(num_slots - 1, -1, -1))  # pop() hands out slot 0 first
        self._window_opened: float | None = None
        self.coalescing_waits = 0
        self.coalescing_wait_s = 0.0

    # -- inbox events ----------------------------------------------------
    def open(self, request_id: str) -> None:
        """A request exists upstream (counts as active before its first chunk)."""
        self.requests.setdefault(request_id, RequestSlot(request_id))

    def add_chunk(self, chunk: Chunk) -> bool:
        """Queues a ready chunk; False for a stale one (request unknown or ended)."""
        req = self.requests.get(chunk.request_id)
        if req is None:
            return False
        req.ready.append(chunk)
        return True

    def close(self, request_id: str) -> int | None:
        """Ends a request (cancel, error or delivered); returns the slot it freed."""
        req = self.requests.pop(request_id, None)
        if req is None or req.slot is None:
            return None
        self.free_slots.append(req.slot)
        return req.slot

    # -- the decision ----------------------------------------------------
    def _runnable(self) -> list[RequestSlot]:
        free = len(self.free_slots)
        out = []
        for req in self.requests.values():
            if not req.ready:
                continue
            if req.slot is None:
                if free == 0:
                    continue
                free -= 1
            out.append(req)
        return sorted(out, key=lambda r: r.ready[0].arrival)

    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan()
        # Oversized chunks can never run: end their requests first.
        for req in list(self.requests.values()):
            if req.ready and req.ready[0].frames > self.budget:
                reason = f"codec chunk of {req.ready[0].frames} frames exceeds the step budget max_num_batched_tokens={self.budget}"
                plan.rejected.append((req.request_id, reason, self.close(req.request_id)))
        runnable = self._runnable()
        if not runnable:
            self._window_opened = None
            return plan
        if self._should_wait(runnable, now):
            first_arrival = runnable[0].ready[0].arrival
            if self._window_opened is None:
                self._window_opened = now
                self.coalescing_waits += 1
            plan.wait_s = max(0.0, first_arrival + self.max_wait_s - now)
            return plan
        if self._window_opened is not None:
            self.coalescing_wait_s += now - self._window_opened
            self._window_opened = None
        left = self.budget
        for req in runnable:
            chunk = req.ready[0]
            if chunk.frames > left:
                continue  # waits intact for a later step
            req.ready.popleft()
            if req.slot is None:
                req.slot = self.free_slots.pop()
            left -= chunk.frames
            plan.rows.append((req, chunk))
        return plan

    def _should_wait(self, runnable: list[RequestSlot], now: float) -> bool:
        if self.max_wait_s == 0 or len(runnable) >= self.min_batch:
            return False
        active = len(self.requests)
        if active < self.min_batch or active == len(runnable):
            return False  # nobody else can become ready
        deadline = runnable[0].ready[0].arrival + self.max_wait_s
        return now < deadline
