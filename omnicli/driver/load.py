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
from typing import TypeVar

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
            if math.isfinite(self.request_rate):
                raise ValueError("a ramp-up sets the request rate itself: leave the request rate out")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 (got {self.concurrency})")
        if math.isnan(self.request_rate) or self.request_rate < MIN_REQUEST_RATE:
            raise ValueError(f"request rate must be at least {MIN_REQUEST_RATE:g} per second, or inf (got {self.request_rate})")
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


def ramp_up_offsets(n: int, strategy: str, start: float, end: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
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
    loop = asyncio.get_running_loop()
    cap = shape.concurrency
    running: set[asyncio.Task] = set()
    errors: list[BaseException] = []
    wake = asyncio.Event()  # a task ended, or the stop came
    sent = finished = 0

    def stopping() -> bool:
        return stop is not None and stop.is_set()

    async def one(item: T) -> None:
        nonlocal finished
        if errors or stopping():  # admitted, but a failure or the stop came before it ran
            return
        try:
            await send(item)
        except Exception as exc:
            errors.append(exc)  # at once: items already admitted behind it do not start
            raise
        finished += 1

    def ended(task: asyncio.Task) -> None:
        running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved (it is in `errors`)
        wake.set()

    async def woken(timeout: float | None = None) -> bool:
        """Waits for the next `wake` (clear it first); False when `timeout` passed instead."""
        try:
            await asyncio.wait_for(wake.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    stopped = None
    if stop is not None:
        stopped = asyncio.create_task(stop.wait())
        stopped.add_done_callback(lambda _: wake.set())
    t0 = loop.time()
    all_sent = False
    try:
        for item, offset in zip(items, shape.arrivals(count if count is not None else len(items) if isinstance(items, Sized) else None)):
            if errors:
                raise errors[0]
            delay = t0 + offset - loop.time()
            if delay > 0:
                await _sleep_unless(stop, delay)
            while cap is not None and len(running) >= cap and not (stopping() or errors):
                wake.clear()
                await woken()  # FIFO: the next item enters when a slot frees
            if errors:
                raise errors[0]
            if stopping():
                break
            task = asyncio.create_task(one(item))
            running.add(task)
            task.add_done_callback(ended)
            sent += 1
        else:
            all_sent = True
        deadline: float | None = None  # end of the grace period once stopped
        while running and not errors:
            if deadline is None and stopping():
                deadline = loop.time() + grace_s
            wake.clear()
            if not await woken(None if deadline is None else max(0.0, deadline - loop.time())):
                break  # the grace period is over: the finally cancels the rest
        if errors:
            raise errors[0]
        return all_sent and finished == sent
    finally:
        if stopped is not None:
            stopped.cancel()
        left = list(running)
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
