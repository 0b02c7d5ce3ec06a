"""Load shapes: closed loop (at most N in flight) and open loop (Poisson / gamma arrivals).

`offer` hands items to a coroutine following a shape, with the stop and
grace rules; `omnicli.driver.drive` builds the request driver on it.

Open-loop arrivals follow vLLM's `bench serve`: inter-arrival times are drawn
from a gamma distribution with shape `burstiness` and scale
`1 / (request_rate * burstiness)`, so the mean rate is `request_rate`
whatever the burstiness; burstiness 1 is a Poisson process, below 1 is
burstier, above 1 more regular. `request_rate = inf` submits everything at
once. A concurrency cap can be combined with either. A ramp-up
(`ramp_up="linear"|"exponential"`, vLLM's `--ramp-up-strategy`) replaces the
fixed rate: request i arrives at the rate `start + (end - start) * i / (n - 1)`
(linear) or `start * (end / start) ** (i / (n - 1))` (exponential).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")

# Below one request per 1000 s an open-loop pass is a typo, not a load (1e-300 would wait forever).
MIN_REQUEST_RATE = 1e-3


@dataclass(frozen=True)
class LoadShape:
    """How requests are offered: `concurrency` None = no cap; `request_rate` inf = all at once."""

    concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    seed: int = 0
    ramp_up: str | None = None  # "linear" | "exponential": the rate goes from ramp_start to ramp_end
    ramp_start: float | None = None  # requests/s of the first request
    ramp_end: float | None = None  # requests/s of the last request

    def __post_init__(self) -> None:
        if self.ramp_up is not None:
            if self.ramp_up not in ("linear", "exponential"):
                raise ValueError(f"ramp-up strategy must be linear or exponential (got {self.ramp_up!r})")
            rates = (self.ramp_start, self.ramp_end)
            if any(r is None or not math.isfinite(r) or r <= 0 for r in rates):
                raise ValueError(f"a ramp-up needs finite start and end rates > 0 (got {rates[0]}, {rates[1]})")
            for which, rate in zip(("start", "end"), rates):  # the floor of --request-rate, for the same reason
                if rate is not None and rate < MIN_REQUEST_RATE:
                    raise ValueError(f"ramp-up {which} rate must be at least {MIN_REQUEST_RATE:g} per second "
                                     f"(one request per {1 / MIN_REQUEST_RATE:g} s; got {rate})")
            if math.isfinite(self.request_rate):
                raise ValueError("a ramp-up sets the request rate itself: leave the request rate out")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 (got {self.concurrency})")
        if math.isnan(self.request_rate) or self.request_rate < MIN_REQUEST_RATE:
            raise ValueError(
                f"request rate must be at least {MIN_REQUEST_RATE:g} per second, or inf (got {self.request_rate})"
            )
        if not math.isfinite(self.burstiness) or self.burstiness <= 0:
            raise ValueError(f"burstiness must be a finite number > 0 (got {self.burstiness})")

    def arrivals(self, n: int | None = None) -> Iterator[float]:
        """The offsets of requests as they come, drawn lazily; a ramp-up needs `n` (the rate
        of request i depends on i / (n - 1))."""
        if self.ramp_up is None:
            return arrival_times(self.request_rate, self.burstiness, self.seed)
        if n is None:
            raise ValueError("a ramp-up needs the number of requests")
        return iter(self.offsets(n).tolist())

    def offsets(self, n: int) -> np.ndarray:
        """Seconds after the start at which each of `n` requests is offered."""
        if self.ramp_up is None:
            return arrival_offsets(n, self.request_rate, self.burstiness, self.seed)
        assert self.ramp_start is not None and self.ramp_end is not None  # __post_init__ checked both
        return ramp_up_offsets(n, self.ramp_up, self.ramp_start, self.ramp_end, self.burstiness, self.seed)

    @property
    def label(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"c{self.concurrency}")
        if self.ramp_up is not None:
            parts.append(f"ramp-{self.ramp_up}-{self.ramp_start:g}-{self.ramp_end:g}")
        if math.isfinite(self.request_rate):
            parts.append(f"r{self.request_rate:g}")
            if self.burstiness != 1.0:
                parts.append(f"b{self.burstiness:g}")
        return "-".join(parts) or "all"


def arrival_times(request_rate: float, burstiness: float = 1.0, seed: int = 0, block: int = 4096) -> Iterator[float]:
    """Endless seconds-after-the-start of each submission, drawn a block at a time (so a
    pass of a million requests holds no million-entry schedule); see `arrival_offsets`."""
    yield 0.0
    if math.isinf(request_rate):
        yield from itertools.repeat(0.0)
        return
    rng = np.random.default_rng(seed)
    t = 0.0
    while True:
        for gap in rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=block).tolist():
            t += gap  # sequential, as np.cumsum: the same schedule in blocks as in one draw
            yield t


def arrival_offsets(n: int, request_rate: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """Seconds after the start at which each of `n` requests is submitted.

    The first request goes at 0; each later one after a gamma-distributed gap.
    """
    if n <= 0:
        return np.zeros(0)
    return np.fromiter(itertools.islice(arrival_times(request_rate, burstiness, seed), n), float, n)


def ramp_up_offsets(
    n: int, strategy: str, start: float, end: float, burstiness: float = 1.0, seed: int = 0
) -> np.ndarray:
    """Like `arrival_offsets`, with the rate of request i ramped from `start` to `end` as vLLM ramps it."""
    if n <= 0:
        return np.zeros(0)
    progress = np.arange(1, n) / max(n - 1, 1)
    rates = start + (end - start) * progress if strategy == "linear" else start * (end / start) ** progress
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rates * burstiness))
    return np.concatenate([[0.0], np.cumsum(gaps)])


async def offer(
    items: Iterable[T],
    send: Callable[[T], Awaitable[None]],
    shape: LoadShape,
    *,
    stop: asyncio.Event | None = None,
    grace_s: float = 0.0,
    count: int | None = None,
) -> bool:
    """Offers every item to `send` following `shape`; returns when all have finished.

    Items are taken from `items` one at a time, when their turn comes: a task
    is created per item only once it is admitted (its arrival time has come
    and, with a concurrency cap, a slot is free), so the work per item does
    not grow with the number of items. If one `send` raises, the others are
    cancelled and the error propagates (per-request failures are expected to
    be caught inside `send`). When `stop` is set no further item is admitted;
    those already inside `send` get `grace_s` seconds to finish, then are
    cancelled. Returns True when every item was sent and finished (also if a
    stop came too late to matter). `count`: how many items there are, when
    `items` has no len() (a ramp-up needs it).
    """
    if count is None and isinstance(items, Sized):
        count = len(items)
    offering = _Offering(send, shape.concurrency, stop)
    try:
        all_sent = await offering.admit(items, shape.arrivals(count))
        await offering.drain(grace_s)
        return all_sent and offering.finished == offering.sent
    finally:
        await offering.cancel_rest()


class _Offering(Generic[T]):
    """The state of one `offer` call: the tasks in flight, the first error, the wake-ups."""

    def __init__(self, send: Callable[[T], Awaitable[None]], cap: int | None, stop: asyncio.Event | None):
        self.send = send
        self.cap = cap
        self.stop = stop
        self.running: set[asyncio.Task[None]] = set()
        self.errors: list[BaseException] = []
        self.wake = asyncio.Event()  # a task ended, or the stop came
        self.sent = 0
        self.finished = 0
        self.stopped: asyncio.Task[bool] | None = None
        if stop is not None:
            self.stopped = asyncio.create_task(stop.wait())
            self.stopped.add_done_callback(lambda _: self.wake.set())

    def stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def raise_first_error(self) -> None:
        if self.errors:
            raise self.errors[0]

    async def admit(self, items: Iterable[T], arrivals: Iterator[float]) -> bool:
        """Starts each item at its arrival time once a slot is free; False when a stop cut it short."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for item, offset in zip(items, arrivals):
            self.raise_first_error()
            delay = t0 + offset - loop.time()
            if delay > 0:
                await _sleep_unless(self.stop, delay)
            while self.cap is not None and len(self.running) >= self.cap and not (self.stopping() or self.errors):
                await self.woken()  # FIFO: the next item enters when a slot frees
            self.raise_first_error()
            if self.stopping():
                return False
            task = asyncio.create_task(self.one(item))
            self.running.add(task)
            task.add_done_callback(self.ended)
            self.sent += 1
        return True

    async def drain(self, grace_s: float) -> None:
        """Waits for the tasks in flight; once stopped, for at most `grace_s` more seconds."""
        loop = asyncio.get_running_loop()
        deadline: float | None = None  # end of the grace period once stopped
        while self.running and not self.errors:
            if deadline is None and self.stopping():
                deadline = loop.time() + grace_s
            if not await self.woken(None if deadline is None else max(0.0, deadline - loop.time())):
                break  # the grace period is over: cancel_rest cancels the rest
        self.raise_first_error()

    async def one(self, item: T) -> None:
        if self.errors or self.stopping():  # admitted, but a failure or the stop came before it ran
            return
        try:
            await self.send(item)
        except Exception as exc:
            self.errors.append(exc)  # at once: items already admitted behind it do not start
            raise
        self.finished += 1

    def ended(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved (it is in `errors`)
        self.wake.set()

    async def woken(self, timeout: float | None = None) -> bool:
        """Clears `wake`, then waits for the next one; False when `timeout` passed instead."""
        self.wake.clear()
        try:
            await asyncio.wait_for(self.wake.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def cancel_rest(self) -> None:
        if self.stopped is not None:
            self.stopped.cancel()
        left = list(self.running)
        for t in left:
            t.cancel()
        # Collect every outcome so no task exception goes unretrieved.
        await asyncio.gather(*left, return_exceptions=True)


async def _sleep_unless(stop: asyncio.Event | None, delay: float) -> None:
    """Sleeps `delay` seconds, less if `stop` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(delay)
        return
    try:
        await asyncio.wait_for(stop.wait(), delay)
    except asyncio.TimeoutError:
        pass
