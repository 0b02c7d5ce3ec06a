"""Load shapes: closed loop cap, Poisson/gamma arrivals, inf = all at once.

drive() runs on a virtual-time event loop (tests/virtual_time.py): its rules
are about order and schedule, so every timestamp below is exact and no test
depends on how fast or how loaded the machine is.
"""

import asyncio
import math

import numpy as np
import pytest

from omnicli.driver.load import LoadShape, arrival_offsets
from omnicli.driver.load import offer as drive
from tests import virtual_time
from tests.virtual_time import now


class InFlight:
    def __init__(self, hold=0.01):
        self.now = 0
        self.peak = 0
        self.hold = hold
        self.started: list[tuple[int, float]] = []

    async def send(self, item):
        self.now += 1
        self.peak = max(self.peak, self.now)
        self.started.append((item, now()))
        try:
            await asyncio.sleep(self.hold)
        finally:
            self.now -= 1


@pytest.mark.parametrize("n", [1, 3, 8])
def test_closed_loop_never_exceeds_n_in_flight_and_reaches_it(n):
    probe = InFlight()
    virtual_time.run(drive(list(range(20)), probe.send, LoadShape(concurrency=n)))
    assert probe.peak == n
    assert sorted(i for i, _ in probe.started) == list(range(20))
    assert [i for i, _ in probe.started] == list(range(20))  # FIFO order


def test_inf_rate_without_cap_submits_all_at_once():
    probe = InFlight(hold=0.2)
    virtual_time.run(drive(list(range(30)), probe.send, LoadShape()))
    assert probe.peak == 30  # all in before the first finished
    assert {t for _, t in probe.started} == {0.0}


def test_poisson_mean_inter_arrival_is_one_over_rate():
    offsets = arrival_offsets(4001, request_rate=4.0, burstiness=1.0, seed=0)
    gaps = np.diff(offsets)
    assert offsets[0] == 0.0
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.08)  # exponential: CV 1


def test_burstiness_keeps_the_rate_and_changes_the_spread():
    bursty = np.diff(arrival_offsets(4001, 4.0, burstiness=0.25, seed=1))
    steady = np.diff(arrival_offsets(4001, 4.0, burstiness=4.0, seed=1))
    assert bursty.mean() == pytest.approx(0.25, rel=0.1)
    assert steady.mean() == pytest.approx(0.25, rel=0.05)
    # gamma(k): CV = 1/sqrt(k)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.1)
    assert steady.std() / steady.mean() == pytest.approx(0.5, rel=0.1)


def test_arrivals_are_reproducible_from_the_seed():
    assert np.array_equal(arrival_offsets(50, 2.0, seed=7), arrival_offsets(50, 2.0, seed=7))
    assert not np.array_equal(arrival_offsets(50, 2.0, seed=7), arrival_offsets(50, 2.0, seed=8))
    assert np.all(arrival_offsets(10, math.inf) == 0)


def test_open_loop_submits_on_schedule():
    shape = LoadShape(request_rate=50.0, seed=3)
    probe = InFlight(hold=0.0)
    virtual_time.run(drive(list(range(15)), probe.send, shape))
    expected = arrival_offsets(15, 50.0, seed=3)
    actual = np.array([t for _, t in probe.started])
    assert np.allclose(actual, expected, rtol=0, atol=1e-9)  # each request exactly on its arrival time


def test_open_loop_with_cap():
    probe = InFlight(hold=0.05)
    virtual_time.run(drive(list(range(12)), probe.send, LoadShape(concurrency=2, request_rate=500.0)))
    assert probe.peak == 2


def test_a_raising_send_cancels_the_rest_and_propagates():
    cancelled, sent = [], []

    async def send(i):
        sent.append(i)
        try:
            if i == 2:
                raise RuntimeError("engine died")
            await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def timed():
        try:
            await drive(list(range(5)), send, LoadShape(concurrency=5))
        finally:
            took.append(now())

    took = []
    with pytest.raises(RuntimeError, match="engine died"):
        virtual_time.run(timed())
    assert took == [0.0]  # nobody waited for the 1 s requests
    # those in flight are cancelled; those behind the failure are never sent
    assert sent == [0, 1, 2] and sorted(cancelled) == [0, 1]


def run_until_stopped(items, send, shape, stop_after_s, grace_s):
    """drive() with its stop event set after `stop_after_s`; returns (complete, seconds taken, when stopped)."""
    stopped_at = []

    async def main():
        stop = asyncio.Event()

        def set_stop():
            stopped_at.append(now())
            stop.set()

        asyncio.get_running_loop().call_later(stop_after_s, set_stop)
        t0 = now()
        complete = await drive(items, send, shape, stop=stop, grace_s=grace_s)
        return complete, now() - t0

    complete, took = virtual_time.run(main())
    return complete, took, stopped_at[0] if stopped_at else None


@pytest.mark.parametrize(
    "shape", [LoadShape(concurrency=2), LoadShape(request_rate=20.0), LoadShape(concurrency=2, request_rate=20.0)]
)
def test_stop_admits_nothing_more_and_lets_requests_in_flight_finish(shape):
    probe = InFlight(hold=0.1)
    finished = []

    async def send(item):
        await probe.send(item)
        finished.append(item)

    complete, took, stopped_at = run_until_stopped(list(range(40)), send, shape, stop_after_s=0.25, grace_s=5.0)
    assert not complete and stopped_at == 0.25
    arrivals = arrival_offsets(40, shape.request_rate)
    slots = [0.0] * (shape.concurrency or 40)  # when each slot is next free
    expected_starts = []
    for arrival in arrivals:
        start = max(arrival, min(slots))  # FIFO: the next request takes the first free slot
        if start >= stopped_at:
            break  # not admitted: the stop came first
        slots[slots.index(min(slots))] = start + 0.1
        expected_starts.append(start)
    assert len(expected_starts) >= 3
    assert [t for _, t in probe.started] == pytest.approx(expected_starts, abs=1e-9)
    assert all(t <= stopped_at for _, t in probe.started)  # none admitted after the stop
    assert sorted(finished) == sorted(i for i, _ in probe.started)  # the grace let every started one finish
    assert took == pytest.approx(max(t for _, t in probe.started) + 0.1)  # the last one's 0.1 s, no more


def test_stop_cancels_what_outlives_the_grace_period():
    cancelled = []

    async def send(item):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    complete, took, _ = run_until_stopped(
        list(range(10)), send, LoadShape(concurrency=3), stop_after_s=0.05, grace_s=0.2
    )
    assert not complete and sorted(cancelled) == [0, 1, 2]
    assert took == pytest.approx(0.05 + 0.2)  # stopped at 0.05 s, cancelled when the 0.2 s grace ended


def test_a_stop_after_every_request_was_sent_still_counts_as_complete():
    probe = InFlight(hold=0.3)  # all three are in flight when the stop comes, and finish in the grace period
    complete, _, _ = run_until_stopped(
        list(range(3)), probe.send, LoadShape(concurrency=3), stop_after_s=0.1, grace_s=1.0
    )
    assert complete and len(probe.started) == 3


@pytest.mark.parametrize(
    "kwargs", [{"concurrency": 0}, {"request_rate": 0}, {"request_rate": float("nan")}, {"burstiness": 0}]
)
def test_invalid_shapes_rejected(kwargs):
    with pytest.raises(ValueError):
        LoadShape(**kwargs)


def test_shape_labels():
    assert LoadShape(concurrency=8).label == "c8"
    assert LoadShape(request_rate=2.5).label == "r2.5"
    assert LoadShape(concurrency=4, request_rate=2, burstiness=0.5).label == "c4-r2-b0.5"
    assert LoadShape().label == "all"
