"""Per-request output queues: what the stages hand back to `Engine.generate`.

Each request in flight has one asyncio queue of typed values: `Audio`
(PCM; `last` ends the request), `Failed` (this request ended with an
error; the others go on) or `Dead` (the engine as a whole stopped). The
codec thread and the engine's own tasks put values here; `generate` reads
them on the event loop. The router also keeps the time of the last value
delivered to anyone, the clock the engine's watchdog judges a stall by.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Audio:
    pcm: np.ndarray
    last: bool = False


@dataclass(frozen=True)
class Failed:
    reason: str


@dataclass(frozen=True)
class Dead:
    reason: str


Output = Audio | Failed | Dead


class OutputRouter:
    """Request id -> its queue; values may come from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.perf_counter) -> None:
        self._loop = loop
        self._clock = clock  # the stall watchdog's time: tests give one that moves only when they say
        self._queues: dict[str, asyncio.Queue[Output]] = {}
        self.last_delivery = clock()

    def __len__(self) -> int:
        return len(self._queues)

    def open(self, rid: str) -> asyncio.Queue[Output]:
        if not self._queues:  # the stall clock starts with the first request in flight
            self.last_delivery = self._clock()
        queue: asyncio.Queue[Output] = asyncio.Queue()
        self._queues[rid] = queue
        return queue

    def idle_seconds(self) -> float:
        """Since the last delivery to any request (or since the first request in flight was opened)."""
        return self._clock() - self.last_delivery

    def close(self, rid: str) -> None:
        self._queues.pop(rid, None)

    def put(self, rid: str, value: Output) -> None:
        """On the event loop's thread."""
        self.last_delivery = self._clock()
        queue = self._queues.get(rid)
        if queue is not None:
            queue.put_nowait(value)

    def put_all(self, value: Output) -> None:
        for rid in list(self._queues):
            self.put(rid, value)

    def from_stage(self, rid: str, pcm: np.ndarray, is_last: bool, error: str | None) -> None:
        """The codec stage's delivery callback (its own thread)."""
        value: Output = Failed(error) if error is not None else Audio(pcm, is_last)
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.put, rid, value)
