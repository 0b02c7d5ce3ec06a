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
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")


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
        if math.isnan(self.request_rate) or self.request_rate <= 0:
            raise ValueError(f"request rate must be > 0 or inf (got {self.request_rate})")
        if not math.isfinite(self.burstiness) or self.burstiness <= 0:
            raise ValueError(f"burstiness must be a finite number > 0 (got {self.burstiness})")

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


def arrival_offsets(n: int, request_rate: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """Seconds after the start at which each of `n` requests is submitted.

    The first request goes at 0; each later one after a gamma-distributed gap.
    """
    if n <= 0:
        return np.zeros(0)
    if math.isinf(request_rate):
        return np.zeros(n)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=n - 1)
    return np.concatenate([[0.0], np.cumsum(gaps)])


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
    items: Sequence[T],
    send: Callable[[T], Awaitable[None]],
    shape: LoadShape,
    *,
    stop: asyncio.Event | None = None,
    grace_s: float = 0.0,
) -> bool:
    """Offers every item to `send` following `shape`; returns when all have finished.

    If one `send` raises, the others are cancelled and the error propagates
    (per-request failures are expected to be caught inside `send`). When
    `stop` is set no further item is admitted; those already inside `send`
    get `grace_s` seconds to finish, then are cancelled. Returns True when
    every item was sent and finished (also if a stop came too late to matter).
    """
    loop = asyncio.get_running_loop()
    offsets = shape.offsets(len(items))
    gate = asyncio.Semaphore(shape.concurrency) if shape.concurrency else None

    def stopping() -> bool:
        return stop is not None and stop.is_set()

    errors: list[BaseException] = []
    finished = 0

    async def one(item: T) -> None:
        nonlocal finished
        try:
            if gate is None:
                await send(item)
            else:
                async with gate:  # FIFO: requests enter in arrival order
                    if stopping() or errors:  # arrived, but not admitted before the stop or a failure
                        return
                    await send(item)
            finished += 1
        except Exception as exc:
            errors.append(exc)
            raise

    tasks: list[asyncio.Task] = []
    stopped = asyncio.create_task(stop.wait()) if stop is not None else None
    t0 = loop.time()
    try:
        for item, offset in zip(items, offsets):
            if errors:
                raise errors[0]
            delay = t0 + float(offset) - loop.time()
            if delay > 0:
                await _sleep_unless(stop, delay)
            if stopping():
                break
            tasks.append(asyncio.create_task(one(item)))
        pending: set[asyncio.Future] = set(tasks)
        deadline: float | None = None  # end of the grace period once stopped
        while pending:
            waiters = pending | {stopped} if stopped is not None and deadline is None else pending
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break  # the grace period is over: the finally cancels the rest
            for task in done & pending:
                if task.exception() is not None:
                    raise task.exception()
            pending -= done
            if stopped in done:
                deadline = loop.time() + grace_s
        return finished == len(items)
    finally:
        if stopped is not None:
            stopped.cancel()
        for t in tasks:
            if not t.done():
                t.cancel()
        # Collect every outcome so no task exception goes unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)


async def _sleep_unless(stop: asyncio.Event | None, delay: float) -> None:
    """Sleeps `delay` seconds, less if `stop` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(delay)
        return
    try:
        await asyncio.wait_for(stop.wait(), delay)
    except asyncio.TimeoutError:
        pass
