"""Runner and session bookkeeping against the small fake engine of tests/fakes.py (this component only)."""

import asyncio

import pytest

from omnicli.benchmark.session import BenchPlan, BenchSession, EngineStartError, ProfileRun, run_round
from omnicli.driver import LoadShape, run_request
from omnicli.driver.pool import LocalPool
from omnicli.engine.request import (
    EngineError,
    EngineStats,
)
from tests.fakes import FakeEngine, Recorder, StopAt, prompts, run_stopped, session_for, tiny_profile

# --- runner ---


def test_run_request_records_chunks_and_info():
    engine = FakeEngine(step=0.01)
    rec = asyncio.run(run_request(engine, prompts(["hello"])[0], "id-1", keep_pcm=True))
    assert rec.ok and rec.request_id == "id-1" and engine.seen == ["id-1"]
    assert rec.chunk_samples == [100, 100, 100]
    assert rec.audio_duration == pytest.approx(0.3)
    assert rec.pcm.shape == (300,)
    assert 0.005 < rec.audio_ttfp < rec.e2el
    assert rec.ref_cache == "cold" and rec.finish_reason == "stop"


def test_failed_request_keeps_partial_audio_and_reason():
    engine = FakeEngine()
    rec = asyncio.run(run_request(engine, prompts(["fail"])[0], "x", keep_pcm=True))
    assert not rec.ok and "over budget" in rec.error
    assert rec.pcm.shape == (300,)
    assert rec.end >= rec.chunk_times[-1]


def test_engine_error_aborts_the_round():
    with pytest.raises(EngineError):
        asyncio.run(run_round(FakeEngine(), prompts(["ok", "die", "ok"]), LoadShape(concurrency=1), id_prefix="t"))


def test_a_request_failure_from_an_engine_fault_ends_the_round_at_once():
    # 10 prompts, 2 in flight, the engine hangs after 2 and says so with EngineDead:
    # the round ends at once instead of offering the 8 left to a dead engine.
    engine = FakeEngine(hang_after=2, hang_s=0.2)
    with pytest.raises(EngineError, match="codec stage stopped"):
        asyncio.run(run_round(engine, prompts(["a"] * 10), LoadShape(concurrency=2), id_prefix="t"))
    assert len(engine.seen) <= 4 and engine.in_flight == 0  # the two that hung, nothing after them


def test_a_request_failure_without_a_fault_is_only_that_request():
    engine = FakeEngine()
    result = asyncio.run(run_round(engine, prompts(["fail", "a", "a"]), LoadShape(concurrency=1), id_prefix="t"))
    assert [r.ok for r in result.records] == [False, True, True] and engine.failure is None


def test_run_round_closed_loop_and_stats_diff():
    engine = FakeEngine()
    engine.tokens = 1000  # earlier activity must not count
    result = asyncio.run(run_round(engine, prompts(["a"] * 10), LoadShape(concurrency=4), id_prefix="t"))
    assert engine.peak == 4
    assert len(result.records) == 10
    assert result.stats.talker_tokens == 10 * 3 * 10
    assert [r.start for r in result.records] == sorted(r.start for r in result.records)
    assert len({r.request_id for r in result.records}) == 10


# --- session ---


def test_warmup_requests_are_run_and_excluded():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)], warmup_requests=3)
    results = asyncio.run(session_for(engines, ["a"] * 4, plan).run())
    (engine,) = engines
    assert len(engine.seen) == 3 + 4
    assert sum("warmup" in i for i in engine.seen) == 3
    (res,) = results
    assert len(res.rounds[0].records) == 4
    assert all("warmup" not in r.request_id for r in res.rounds[0].records)
    assert res.warmup_requests == 3
    # warmup talker tokens are not in the measured stats
    assert res.stats.talker_tokens == 4 * 30


def test_warmup_pass_runs_a_whole_discarded_pass():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)], warmup_pass=True)
    (res,) = asyncio.run(session_for(engines, ["a"] * 5, plan).run())
    assert len(engines[0].seen) == 10 and res.warmup_requests == 5


def test_sweep_one_fresh_pass_per_concurrency_on_one_engine():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=c) for c in (1, 4)], warmup_requests=1)
    rec = Recorder()
    results = asyncio.run(session_for(engines, ["a"] * 8, plan, observer=rec).run())
    assert len(engines) == 1 and engines[0].closed
    assert [r.shape.concurrency for r in results] == [1, 4]
    assert all(len(r.rounds[0].records) == 8 for r in results)
    # the warmup is attributed to the first pass only
    assert [r.warmup_requests for r in results] == [1, 0]
    assert [e[1] for e in rec.events if e[0] == "phase"] == ["a warmup", "a c1", "a c4"]
    assert sum(1 for e in rec.events if e[0] == "done") == 1 + 16


def test_rounds_are_kept_separately():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)], rounds=3)
    (res,) = asyncio.run(session_for(engines, ["a"] * 4, plan).run())
    assert len(res.rounds) == 3 and all(len(r.records) == 4 for r in res.rounds)
    assert len(set(engines[0].seen)) == 12  # unique request ids across rounds


def test_ab_restarts_the_engine_and_uses_the_same_prompts():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)])
    results = asyncio.run(session_for(engines, ["a", "b", "c"], plan, labels=("a", "b")).run())
    assert len(engines) == 2 and all(e.closed for e in engines)
    assert [r.profile.label for r in results] == ["a", "b"]
    assert [[r.utt for r in res.rounds[0].records] for res in results] == [["u0", "u1", "u2"]] * 2
    # a fresh engine: references are cold again for profile b
    assert results[1].rounds[0].records[0].ref_cache == "cold"


def test_engine_closed_on_error_and_completed_passes_kept():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=1)])
    session = session_for(engines, ["ok"] * 3, plan, labels=("a", "b"), engine_kwargs={"b": {"die_after": 1}})
    with pytest.raises(EngineError):
        asyncio.run(session.run())
    assert [e.closed for e in engines] == [True, True]
    assert [r.profile.label for r in session.results] == ["a"]


def test_engine_fault_keeps_the_completed_passes_and_names_the_unfinished_one():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=1), LoadShape(concurrency=2)])
    session = session_for(engines, ["a"] * 3, plan, engine_kwargs={"a": {"hang_after": 4, "hang_s": 0.05}})
    with pytest.raises(EngineError, match="codec stage stopped"):
        asyncio.run(session.run())
    assert [r.shape.label for r in session.results] == ["c1"]
    assert session.unfinished == "a c2" and engines[0].closed


def test_stop_drops_the_pass_in_progress_closes_the_engine_and_starts_no_other_profile():
    engines = []
    stopper = StopAt("a c2", 0.1)  # c2: 40 requests of ~30 ms, 2 at a time
    plan = BenchPlan(shapes=[LoadShape(concurrency=8), LoadShape(concurrency=2), LoadShape(concurrency=4)])
    session = session_for(
        engines, ["a"] * 40, plan, labels=("a", "b"), observer=stopper, engine_kwargs={"a": {"step": 0.01}}
    )
    took = run_stopped(session, stopper)
    (engine,) = engines  # profile b never started
    assert engine.closed and engine.in_flight == 0
    assert [r.shape.label for r in session.results] == ["c8"]
    assert session.unfinished == "a c2" and session.stopped
    assert len([i for i in engine.seen if "-c2-" in i]) < 40  # submission stopped
    assert [e[1] for e in stopper.events if e[0] == "phase"] == ["a c8", "a c2"]  # c4 never began
    # virtual time: the c8 pass (5 rounds of 3 chunks of 10 ms), 0.1 s of c2, then at most
    # the 3 chunks of the 2 requests in flight; no further request was started
    assert took <= 0.15 + 0.1 + 0.03 + 1e-9


def test_requests_that_outlive_the_grace_period_are_cancelled():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)])
    stopper = StopAt("a c2", 0.1)
    session = session_for(engines, ["a"] * 4, plan, observer=stopper, engine_kwargs={"a": {"step": 10.0}})
    session.grace_s = 0.2
    took = run_stopped(session, stopper)
    assert took == pytest.approx(0.1 + 0.2)  # the stop, then the grace period; not the 30 s the requests need
    assert engines[0].closed and engines[0].in_flight == 0 and session.results == []
    assert session.unfinished == "a c2"


def test_engine_closed_on_cancellation():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=1)])

    async def main():
        session = session_for(engines, ["a"] * 50, plan)
        task = asyncio.create_task(session.run())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert engines and engines[0].closed and engines[0].in_flight == 0


def test_engine_start_failure_is_reported_per_profile():
    async def start(profile):
        raise RuntimeError("no such model")

    plan = BenchPlan(shapes=[LoadShape()])
    session = BenchSession([ProfileRun("x", tiny_profile("x"))], prompts(["a"]), plan, LocalPool.factory(start))
    with pytest.raises(EngineStartError, match="'x'.*no such model"):
        asyncio.run(session.run())


def test_failed_and_empty_requests_recorded_and_pcm_handed_to_round_done():
    engines = []
    rec = Recorder()
    plan = BenchPlan(shapes=[LoadShape(concurrency=3)], keep_pcm=True)
    (res,) = asyncio.run(session_for(engines, ["ok", "fail", "empty"], plan, observer=rec).run())
    by_utt = {r.utt: r for r in res.rounds[0].records}
    assert by_utt["u0"].nonempty
    assert not by_utt["u1"].ok and by_utt["u1"].num_samples == 300
    assert by_utt["u2"].ok and by_utt["u2"].num_samples == 0
    # audio reached round_done, then was freed
    assert rec.rounds == [("a", "c3", 0, [True, True, True])]
    assert all(r.pcm is None for r in res.rounds[0].records)


def test_plan_validation():
    with pytest.raises(ValueError):
        BenchPlan(shapes=[])
    with pytest.raises(ValueError):
        BenchPlan(shapes=[LoadShape()], rounds=0)


def test_engine_stats_sum_counters_and_keep_facts_across_rounds():

    before = EngineStats(talker_tokens=10, codec_steps=2, extra={"deploy_overlay": {"digest": "old"}})
    after = EngineStats(talker_tokens=25, codec_steps=5, extra={"deploy_overlay": {"digest": "abc"}})
    one_round = after.minus(before)
    assert (one_round.talker_tokens, one_round.codec_steps) == (15, 3)
    assert one_round.extra == {"deploy_overlay": {"digest": "abc"}}  # facts of the later snapshot, not dropped
    total = EngineStats().plus(one_round).plus(one_round)
    assert (total.talker_tokens, total.codec_steps) == (30, 6)
    assert total.to_dict()["extra"]["deploy_overlay"]["digest"] == "abc"
