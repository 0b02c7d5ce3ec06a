"""The request driver's cost does not grow with the rows: bounded task creation, records
released once written, bench prompts cycled lazily, stops that end at once, and the
rounds an interrupted bench finished kept (fake engines of this component only; the
figures at 200,000 rows are scripts/bench_driver_scale.py's)."""

from __future__ import annotations

import asyncio
import importlib
import tracemalloc
import weakref

import pytest

from omnicli.benchmark.prompts import load_prompts
from omnicli.benchmark.session import BenchPlan
from omnicli.driver import LoadShape, drive
from omnicli.driver.load import offer
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.run import SynthRun
from tests import virtual_time
from tests.fakes import FakeEngine, StopAt, prompts, run_stopped, session_for, write_manifest


def test_offer_creates_a_task_only_when_a_slot_frees():
    pulled, most_tasks = [], [0]

    def items():
        for i in range(5000):
            pulled.append(i)
            yield i

    async def send(i):
        most_tasks[0] = max(most_tasks[0], len(asyncio.all_tasks()))
        assert len(pulled) <= i + 1 + 4  # the items are taken as they are admitted, not all up front
        await asyncio.sleep(0.001)

    async def main():
        return await offer(items(), send, LoadShape(concurrency=4))

    assert virtual_time.run(main()) is True
    # was: one task per item up front (5000), and a wait over all of them at every completion
    assert most_tasks[0] <= 4 + 3  # the slots, the caller, the stop watcher
    assert len(pulled) == 5000


def test_open_loop_arrivals_are_drawn_as_they_come():
    seen = []

    async def send(i):
        seen.append(i)

    async def main():
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.0, stop.set)
        return await offer(iter(range(10**9)), send, LoadShape(request_rate=100.0), stop=stop)

    assert virtual_time.run(main()) is False  # stopped; a billion arrival times were never drawn
    assert 50 < len(seen) < 200


def test_synth_keeps_no_record_and_no_audio_past_its_row(tmp_path, monkeypatch):
    drive_module = importlib.import_module("omnicli.driver.drive")  # the package's `drive` is the function
    made = []  # a weak reference to every record the driver made
    real = drive_module.run_request

    async def tracked(*args, **kwargs):
        record = await real(*args, **kwargs)
        made.append(weakref.ref(record))
        return record

    monkeypatch.setattr(drive_module, "run_request", tracked)
    m = read_manifest(write_manifest(tmp_path, [f"row {i}" for i in range(60)]))
    run = SynthRun(FakeEngine(), tmp_path / "out", resolved=load_profile("cpu"), concurrency=4)
    live = []
    run.on_result = lambda result: live.append(sum(ref() is not None for ref in made))
    asyncio.run(run.run(m.rows))
    assert len(run.results) == 60
    assert (
        max(live) <= 4
    )  # the one being written (and those finishing beside it); was: every finished one, PCM included
    assert len(made) == 60 and not any(ref() is not None for ref in made)


def test_drive_keeps_records_only_when_asked():
    async def main(keep):
        sunk = []
        result = await drive(
            FakeEngine(), iter(prompts(["a"] * 10)), LoadShape(concurrency=3), keep_records=keep, on_record=sunk.append
        )
        return result, sunk

    kept, sunk = asyncio.run(main(True))
    assert len(kept.records) == 10 and len(sunk) == 10 and kept.complete
    dropped, sunk = asyncio.run(main(False))
    assert dropped.records == [] and len(sunk) == 10 and dropped.complete


def test_a_million_bench_prompts_are_a_view_not_a_list():
    tracemalloc.start()
    try:
        ps = load_prompts(None, num_prompts=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ps.prompts) == 1_000_000 and ps.num_rows == 8
    assert peak < 20e6, peak  # was: a million Prompt objects (hundreds of MB) before the engine started
    assert ps.prompts[8].utt == ps.prompts[0].utt and ps.prompts[-1] is ps.prompts[999_999 % 8]
    assert [p.utt for p in ps.prompts[:9]][-1] == ps.prompts[0].utt


def test_a_stop_ends_a_million_request_pass_within_the_grace():
    engines = []
    stopper = StopAt("a c1", 0.05)
    session = session_for(engines, ["a"] * 8, BenchPlan(shapes=[LoadShape(concurrency=1)]), observer=stopper)
    session.prompts = load_prompts(None, num_prompts=1_000_000).prompts  # the demo rows, cycled
    took = run_stopped(session, stopper)
    assert took <= 0.05 + session.grace_s and len(engines[0].seen) < 10
    assert engines[0].closed and session.unfinished == "a c1" and session.results == []


def test_an_interrupted_pass_keeps_the_rounds_that_finished():
    engines = []
    stopper = StopAt("a c1 round 4/1000", 0.001)
    plan = BenchPlan(shapes=[LoadShape(concurrency=1)], rounds=1000)
    session = session_for(engines, ["a", "a"], plan, observer=stopper)  # the 2nd request of round 4 is never admitted
    run_stopped(session, stopper)
    # was: the whole pass dropped, "0 completed passes", no figures for the 3 rounds done
    (passed,) = session.results
    assert len(passed.rounds) == 3 and all(len(r.records) == 2 for r in passed.rounds)
    assert session.unfinished == "a c1 round 4/1000"



def test_a_request_rate_below_the_floor_is_refused():
    from typer.testing import CliRunner

    from omnicli.cli import app
    from omnicli.driver.load import MIN_REQUEST_RATE

    for rate in (1e-300, MIN_REQUEST_RATE / 2):  # was: accepted, the first gap of the schedule some 1e300 s
        result = CliRunner().invoke(app, ["bench", "--request-rate", str(rate)])
        assert result.exit_code == 2 and "must be at least 0.001" in " ".join(result.output.split())
        with pytest.raises(ValueError, match="at least 0.001"):
            LoadShape(request_rate=rate)
    assert LoadShape(request_rate=MIN_REQUEST_RATE).request_rate == MIN_REQUEST_RATE


def test_a_ramp_up_follows_its_schedule_and_needs_the_count():
    shape = LoadShape(ramp_up="linear", ramp_start=10.0, ramp_end=100.0)
    assert list(shape.arrivals(50)) == shape.offsets(50).tolist()
    with pytest.raises(ValueError, match="ramp-up needs the number of requests"):
        shape.arrivals(None)
    sent = []

    async def send(i):
        sent.append((i, virtual_time.now()))

    async def main():
        t0 = virtual_time.now()
        assert await offer(iter(range(50)), send, shape, count=50)
        return t0

    t0 = virtual_time.run(main())
    assert [round(t - t0, 9) for _, t in sent] == [round(x, 9) for x in shape.offsets(50)]
