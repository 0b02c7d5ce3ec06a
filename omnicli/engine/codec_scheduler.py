"""Stage 1 scheduling policy: which ready chunks run in the next codec step.

Pure logic with an injected clock (`now` arguments, chunk arrival times),
no threads and no tensors, so every rule is unit-testable:

- Slots: a request takes one of `num_slots` slots with its first executed
  chunk and keeps it until it ends (last chunk delivered, error or cancel).
  With no free slot a new request simply waits. Free slots are handed out
  lowest first, which keeps active slots contiguous for the `slot` backend.
  Every slot freed since the last plan travels in the next plan
  (`freed_slots`, as vLLM's scheduler output carries finished request ids):
  the stage resets their state before it runs the plan's step.
- In flight: a dispatched chunk is in flight until the stage reports it
  delivered (`complete`); meanwhile its request gets no other chunk, no
  rejection and no slot release, so audio reaches the client in order.
- Atomic chunks: a chunk runs whole under the step budget (frames) or waits
  intact at the head of its request's queue; a chunk larger than the whole
  budget ends its request with one error once nothing of it is in flight.
- Coalescing: with fewer runnable requests than `min_batch` while enough
  others could still become runnable, wait until `max_wait` after the first
  waiting arrival. The window is fixed when it opens (arrivals never extend
  it) and closes with the batch it produced. Only distinct runnable
  requests count: more chunks of a ready request (duplicates), chunks of
  ended requests (stale) and bare terminal messages (finished, retired at
  once without compute) do not.
- First-chunk priority (on unless turned off): a request's first chunk is
  what its first audio waits for, so the budget takes first chunks ahead
  of the chunks of started requests (the plan's rows stay in arrival
  order). Without coalescing, a step that takes first chunks also takes no
  steady chunk: it is small (a first chunk is short and has no look-back)
  and delivers at once instead of after a whole batch of steady windows.
  Steady chunks are passed over by at most one such step in a row (the
  next step takes them, behind any first chunks), so nothing starves. With
  coalescing on, the batch a window waited for runs whole.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from omnicli.profile.schema import CodecStageConfig


@dataclass
class Chunk:
    request_id: str
    codes: np.ndarray  # (frames, K); empty for a bare terminal message
    is_last: bool
    arrival: float
    frames: int = field(init=False)  # computed once: the scheduler reads it often

    def __post_init__(self) -> None:
        self.frames = int(len(self.codes))


@dataclass
class Row:
    """One request's chunk in a step."""

    request_id: str
    slot: int
    chunk: Chunk


@dataclass
class Retired:
    """A request ended without compute: a bare terminal (error None) or an oversized chunk."""

    request_id: str
    slot: int | None  # the slot it freed (its state must be reset), if it held one
    error: str | None = None


@dataclass
class StepPlan:
    rows: list[Row] = field(default_factory=list)
    retired: list[Retired] = field(default_factory=list)  # deliver before waiting
    freed_slots: list[int] = field(default_factory=list)  # reset these before running `rows` (they may be reused there)
    wait_s: float | None = None  # no rows: seconds until the coalescing window closes (None: nothing to wait for)


@dataclass
class _Request:
    request_id: str
    slot: int | None = None
    ready: deque = field(default_factory=deque)
    in_flight: bool = False
    ending: bool = False  # its last chunk is in flight
    cancelled: bool = False  # cancelled while a chunk was in flight
    ended_input: bool = False  # its last chunk has been received


class CodecScheduler:
    """Takes settings the profile schema has validated (`CodecStageConfig`); it does not re-check them."""

    def __init__(
        self, num_slots: int, budget_frames: int, min_batch: int = 1, max_wait_ms: float = 0.0, *,
        first_chunk_priority: bool = True,
    ):
        self.num_slots = num_slots
        self.first_chunk_priority = first_chunk_priority
        self._passed_over = False  # the last step took first chunks only and left steady chunks waiting
        self.budget = budget_frames
        self.min_batch = min_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self._requests: dict[str, _Request] = {}
        self._free = list(range(num_slots))  # a heap: the lowest free slot first
        self._freed: list[int] = []  # released since the last plan; their state is not reset yet
        self._window_start: float | None = None  # first waiting arrival of the open window
        self._window_opened: float | None = None
        self.coalescing_waits = 0  # windows opened
        self.coalescing_wait_s = 0.0  # time from a window's opening to its dispatch

    @classmethod
    def from_config(cls, cfg: CodecStageConfig) -> CodecScheduler:
        return cls(
            cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.generation_min_batch_size, cfg.generation_max_wait_ms
        )

    # -- events ------------------------------------------------------------
    def open(self, request_id: str) -> None:
        """A request exists upstream: it counts as active before its first chunk."""
        self._requests.setdefault(request_id, _Request(request_id))

    def add_chunk(self, chunk: Chunk) -> bool:
        """Queues a chunk; False when it is dropped (request unknown, ended or cancelled; empty non-terminal)."""
        req = self._requests.get(chunk.request_id)
        if req is None or req.cancelled or req.ended_input:
            return False
        if chunk.frames == 0 and not chunk.is_last:
            return False
        req.ended_input = chunk.is_last
        if chunk.frames == 0 and req.ready:  # a bare terminal behind queued audio: the last audio ends the request
            req.ready[-1].is_last = True
            return True
        req.ready.append(chunk)
        return True

    def cancel(self, request_id: str) -> int | None:
        """Ends a request (client gone, upstream error). Returns the slot it freed, if any (also in
        the next plan's `freed_slots`); a request with a chunk in flight frees its slot on `complete`."""
        req = self._requests.get(request_id)
        if req is None:
            return None
        req.ready.clear()
        if req.in_flight:
            req.cancelled = True
            return None
        return self._release(req)

    def complete(self, request_id: str, failed: bool = False) -> int | None:
        """The request's in-flight chunk was delivered (or its step failed). Returns the slot
        freed when that ended the request (last chunk, cancelled meanwhile, or failed); the
        next plan's `freed_slots` carries it too."""
        req = self._requests.get(request_id)
        if req is None:
            return None
        req.in_flight = False
        if req.ending or req.cancelled or failed:
            return self._release(req)
        return None

    # -- the decision --------------------------------------------------------
    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan(retired=self._retire())
        plan.freed_slots, self._freed = self._freed, []
        runnable, could_join = self._candidates()
        if not runnable:
            self._close_window(now)
            return plan
        if self._should_wait(runnable, could_join):
            start = runnable[0].ready[0].arrival if self._window_start is None else self._window_start
            deadline = start + self.max_wait_s
            if now < deadline:
                if self._window_start is None:  # open the window: fixed from now on
                    self._window_start, self._window_opened = start, now
                    self.coalescing_waits += 1
                plan.wait_s = deadline - now
                return plan
        self._close_window(now)
        left = self.budget
        for req in self._prioritized(runnable, split=self.max_wait_s == 0 or self.min_batch <= 1):
            chunk = req.ready[0]
            if chunk.frames > left:
                continue  # waits intact, keeping its place, for a later step
            if req.slot is None:
                req.slot = heapq.heappop(self._free)
            req.ready.popleft()
            req.in_flight = True
            req.ending = chunk.is_last
            left -= chunk.frames
            plan.rows.append(Row(req.request_id, req.slot, chunk))
        plan.rows.sort(key=lambda r: r.chunk.arrival)  # stable: equal arrivals keep the order they were taken in
        return plan

    def _prioritized(self, runnable: list[_Request], *, split: bool) -> list[_Request]:
        """The step's candidates in the order the budget takes them (see first-chunk priority);
        `split`: a step with first chunks may leave the steady ones for the next step."""
        if not self.first_chunk_priority:
            return runnable
        first = [r for r in runnable if r.slot is None]  # no slot yet: its head is its first chunk
        steady = [r for r in runnable if r.slot is not None]
        if split and first and steady and not self._passed_over:
            self._passed_over = True
            return first
        self._passed_over = False
        return first + steady

    def _retire(self) -> list[Retired]:
        """Ends requests whose head needs no compute: bare terminals and oversized chunks."""
        out = []
        for req in list(self._requests.values()):
            if req.in_flight or not req.ready:
                continue
            head = req.ready[0]
            if head.frames == 0:
                out.append(Retired(req.request_id, self._release(req)))
            elif head.frames > self.budget:
                reason = (
                    f"codec chunk of {head.frames} frames exceeds the codec step budget "
                    f"(codec.max_num_batched_tokens={self.budget} frames): it can never be scheduled"
                )
                out.append(Retired(req.request_id, self._release(req), reason))
        return out

    def _candidates(self) -> tuple[list[_Request], int]:
        """Requests that can run in this step, oldest head first, and how many others could still join."""
        holders, seekers, idle_holders, idle_seekers = [], [], 0, 0
        for req in self._requests.values():
            ready = bool(req.ready) and not req.in_flight
            if req.slot is not None:
                if ready:
                    holders.append(req)
                else:
                    idle_holders += 1
            elif ready:
                seekers.append(req)
            else:
                idle_seekers += 1
        free = len(self._free)
        seekers.sort(key=lambda r: r.ready[0].arrival)
        starting = seekers[:free]  # a request without a slot starts only when one is free
        runnable = sorted(holders + starting, key=lambda r: r.ready[0].arrival)
        could_join = idle_holders + min(idle_seekers, free - len(starting))
        return runnable, could_join

    def _should_wait(self, runnable: list[_Request], could_join: int) -> bool:
        if self.max_wait_s == 0 or len(runnable) >= self.min_batch:
            return False
        return len(runnable) + could_join >= self.min_batch  # else waiting cannot reach the target

    def _close_window(self, now: float) -> None:
        if self._window_opened is not None:
            self.coalescing_wait_s += now - self._window_opened
        self._window_start = self._window_opened = None

    def _release(self, req: _Request) -> int | None:
        del self._requests[req.request_id]
        if req.slot is not None:
            heapq.heappush(self._free, req.slot)
            self._freed.append(req.slot)
        return req.slot

    # -- introspection -------------------------------------------------------
    @property
    def active(self) -> int:
        return len(self._requests)

    @property
    def requests(self) -> Mapping[str, object]:
        """Active requests by id (read-only)."""
        return MappingProxyType(self._requests)

    @property
    def free_slots(self) -> list[int]:
        return sorted(self._free)

    def slot_of(self, request_id: str) -> int | None:
        req = self._requests.get(request_id)
        return req.slot if req else None

    def queued_frames(self, request_id: str) -> list[int]:
        """Frames of each chunk a request has waiting (for tests and diagnostics)."""
        req = self._requests.get(request_id)
        return [c.frames for c in req.ready] if req else []
