"""A stage's busy time: wall time with at least one request in flight (its throughput's denominator)."""

from __future__ import annotations

import time


class BusyClock:
    def __init__(self) -> None:
        self.in_flight = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        if self.in_flight == 0:
            self._since = time.perf_counter()
        self.in_flight += 1

    def exit(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._total += time.perf_counter() - self._since

    def seconds(self) -> float:
        """Busy time so far, the interval still open included."""
        return self._total + (time.perf_counter() - self._since if self.in_flight else 0.0)
