"""An asyncio event loop on virtual time, for tests whose rule is about order and schedule.

Its clock (`loop.time()`, which asyncio.sleep, wait_for and call_later use) only
moves when nothing is ready to run: it then jumps straight to the next timer.
A schedule of 0.25 s gaps runs in microseconds and every timestamp is exact,
on a fast machine and on a loaded one alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class _JumpingSelector:
    """Wraps the loop's selector: never blocks; a wait of `timeout` advances the clock instead."""

    def __init__(self, loop: VirtualTimeLoop, real):
        self._loop = loop
        self._real = real

    def select(self, timeout=None):
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:  # nothing scheduled, nothing ready: only another thread could wake us
            events = self._real.select(5.0)
            if not events:
                raise RuntimeError("virtual-time loop: every task waits and no timer is scheduled (deadlock)")
            return events
        self._loop.advance(timeout)
        return events

    def __getattr__(self, name):
        return getattr(self._real, name)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._selector = _JumpingSelector(self, self._selector)

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def run(coro: Coroutine[Any, Any, Any]):
    """asyncio.run on virtual time."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        asyncio.set_event_loop(None)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def now() -> float:
    return asyncio.get_running_loop().time()
