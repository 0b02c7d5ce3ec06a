"""CodecScheduler rules: slots, atomic chunks, oversized chunks, coalescing.

The scheduler is pure policy: time is passed in (`now`, chunk arrivals), so
these tests drive the real scheduler with a fake clock.
"""


import numpy as np
import pytest

from omnicli.engine.codec_scheduler import Chunk, CodecScheduler

K = 4


def chunk(rid: str, frames: int, t: float = 0.0, last: bool = False) -> Chunk:
    return Chunk(rid, np.zeros((frames, K), dtype=np.int64), last, t)


def ids(plan) -> list[str]:
    return [r.request_id for r in plan.rows]


def run_all(s: CodecScheduler, plan) -> None:
    """Delivers every row of a plan (the stage calls complete after delivery)."""
    for r in plan.rows:
        s.complete(r.request_id)


# -- slots --------------------------------------------------------------------


def test_a_request_holds_one_slot_from_its_first_chunk_to_its_end():
    s = CodecScheduler(num_slots=2, budget_frames=100)
    s.open("a")
    assert s.slot_of("a") is None  # no slot before its first chunk runs
    s.add_chunk(chunk("a", 5))
    plan = s.schedule(0.0)
    assert [(r.request_id, r.slot) for r in plan.rows] == [("a", 0)]
    run_all(s, plan)
    for i in range(3):
        s.add_chunk(chunk("a", 5, t=i + 1))
        plan = s.schedule(i + 1)
        assert plan.rows[0].slot == 0
        run_all(s, plan)
    assert s.slot_of("a") == 0 and len(s.free_slots) == 1
    s.add_chunk(chunk("a", 2, t=9, last=True))
    plan = s.schedule(9)
    assert s.complete("a") == 0  # its last chunk delivered: the slot is freed
    assert len(s.free_slots) == 2 and s.active == 0


def test_slot_exhaustion_makes_new_requests_wait_never_fail():
    s = CodecScheduler(num_slots=2, budget_frames=100)
    for rid in "abc":
        s.open(rid)
        s.add_chunk(chunk(rid, 5, t=ord(rid)))
    plan = s.schedule(200)
    assert ids(plan) == ["a", "b"] and not plan.retired
    run_all(s, plan)
    assert s.schedule(201).rows == []  # c waits: no slot, no error
    assert s.queued_frames("c") == [5]
    s.add_chunk(chunk("a", 3, t=202, last=True))
    plan = s.schedule(202)
    assert ids(plan) == ["a"]
    assert s.complete("a") == 0
    plan = s.schedule(203)
    assert [(r.request_id, r.slot) for r in plan.rows] == [("c", 0)]  # the freed slot


@pytest.mark.parametrize("how", ["cancel", "oversized"])
def test_slots_are_freed_on_cancel_and_on_error(how):
    s = CodecScheduler(num_slots=1, budget_frames=10)
    s.open("a")
    s.add_chunk(chunk("a", 5))
    run_all(s, s.schedule(0))
    assert len(s.free_slots) == 0
    if how == "cancel":
        assert s.cancel("a") == 0
    else:
        s.add_chunk(chunk("a", 11, t=1))
        plan = s.schedule(1)
        assert [(r.request_id, r.slot) for r in plan.retired] == [("a", 0)]
    assert len(s.free_slots) == 1 and s.active == 0
    s.open("b")
    s.add_chunk(chunk("b", 5, t=2))
    assert [(r.request_id, r.slot) for r in s.schedule(2).rows] == [("b", 0)]


def test_cancel_while_in_flight_frees_the_slot_only_after_delivery():
    s = CodecScheduler(num_slots=1, budget_frames=10)
    s.open("a")
    s.add_chunk(chunk("a", 5))
    s.schedule(0)
    assert s.cancel("a") is None  # its chunk is still executing: the slot state is in use
    assert len(s.free_slots) == 0
    assert s.add_chunk(chunk("a", 5, t=1)) is False  # stale
    assert s.complete("a") == 0
    assert len(s.free_slots) == 1 and s.active == 0


def test_free_slots_are_handed_out_lowest_first():
    s = CodecScheduler(num_slots=4, budget_frames=100)
    for i, rid in enumerate("abcd"):
        s.open(rid)
        s.add_chunk(chunk(rid, 1, t=i))
    plan = s.schedule(10)
    assert [r.slot for r in plan.rows] == [0, 1, 2, 3]
    run_all(s, plan)
    s.cancel("c")
    s.cancel("a")
    s.open("e")
    s.add_chunk(chunk("e", 1, t=11))
    assert s.schedule(11).rows[0].slot == 0


# -- atomic chunks --------------------------------------------------------------


def test_a_chunk_that_does_not_fit_the_budget_left_waits_intact():
    s = CodecScheduler(num_slots=4, budget_frames=1296)
    s.open("big")
    s.open("other")
    s.add_chunk(chunk("other", 1168, t=0.0))
    big = chunk("big", 1168, t=0.1)
    s.add_chunk(big)
    s.add_chunk(chunk("small", 1, t=0.2))  # unknown request: dropped
    plan = s.schedule(1.0)
    assert ids(plan) == ["other"]  # 128 frames left: big is not cut to a 128-frame prefix
    assert s.queued_frames("big") == [1168]
    run_all(s, plan)
    plan = s.schedule(1.1)
    assert ids(plan) == ["big"]
    assert plan.rows[0].chunk is big and plan.rows[0].chunk.frames == 1168


def test_budget_is_filled_in_arrival_order_and_a_skipped_chunk_keeps_its_place():
    s = CodecScheduler(num_slots=4, budget_frames=10)
    for rid in "abc":
        s.open(rid)
    s.add_chunk(chunk("a", 6, t=0))
    s.add_chunk(chunk("b", 6, t=1))
    s.add_chunk(chunk("c", 4, t=2))
    plan = s.schedule(3)
    assert ids(plan) == ["a", "c"]  # b (6) does not fit in the 4 left; c (4) does
    run_all(s, plan)
    s.add_chunk(chunk("a", 6, t=4))
    plan = s.schedule(5)
    assert ids(plan) == ["b"]  # b arrived before a's new chunk: it goes first
    assert s.queued_frames("a") == [6]


def test_one_request_never_has_two_chunks_in_one_step():
    s = CodecScheduler(num_slots=2, budget_frames=100)
    s.open("a")
    for i in range(3):
        s.add_chunk(chunk("a", 2, t=i))
    plan = s.schedule(5)
    assert ids(plan) == ["a"]
    assert s.schedule(6).rows == []  # in flight: its next chunk waits for delivery
    run_all(s, plan)
    assert ids(s.schedule(7)) == ["a"]


# -- oversized chunks -------------------------------------------------------------


def test_an_oversized_chunk_ends_its_request_with_exactly_one_error_others_keep_running():
    s = CodecScheduler(num_slots=4, budget_frames=100)
    for rid in "ab":
        s.open(rid)
    s.add_chunk(chunk("a", 101, t=0))
    s.add_chunk(chunk("b", 50, t=1))
    plan = s.schedule(2)
    assert [(r.request_id, r.error is not None) for r in plan.retired] == [("a", True)]
    assert "101 frames" in plan.retired[0].error and "max_num_batched_tokens=100" in plan.retired[0].error
    assert ids(plan) == ["b"]
    run_all(s, plan)
    assert s.add_chunk(chunk("a", 5, t=3, last=True)) is False  # later chunks are stale
    plan = s.schedule(4)
    assert plan.retired == [] and plan.rows == []
    assert len(s.free_slots) == 3  # only b holds a slot


def test_rejection_waits_until_the_previous_chunk_of_that_request_is_delivered():
    s = CodecScheduler(num_slots=2, budget_frames=100)
    s.open("a")
    s.add_chunk(chunk("a", 50, t=0))
    plan = s.schedule(1)
    assert ids(plan) == ["a"]  # executing
    s.add_chunk(chunk("a", 500, t=2))
    assert s.schedule(3).retired == []  # its valid audio goes to the client first
    assert s.complete("a") is None
    plan = s.schedule(4)
    assert [(r.request_id, r.slot) for r in plan.retired] == [("a", 0)]
    assert len(s.free_slots) == 2


# -- coalescing -------------------------------------------------------------------


def coalescing(n_active: int, target: int, wait_ms: float, slots: int = 8) -> CodecScheduler:
    s = CodecScheduler(num_slots=slots, budget_frames=1000, min_batch=target, max_wait_ms=wait_ms)
    for i in range(n_active):
        s.open(f"r{i}")
    return s


def test_dispatch_is_immediate_when_enough_are_ready():
    s = coalescing(4, target=2, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.000))
    s.add_chunk(chunk("r1", 5, t=0.001))
    assert ids(s.schedule(0.001)) == ["r0", "r1"]
    assert s.coalescing_waits == 0


def test_dispatch_is_immediate_with_fewer_active_requests_than_the_target():
    s = coalescing(2, target=3, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.0))
    assert ids(s.schedule(0.0)) == ["r0"]


def test_dispatch_is_immediate_with_a_zero_wait():
    s = coalescing(4, target=3, wait_ms=0)
    s.add_chunk(chunk("r0", 5, t=0.0))
    assert ids(s.schedule(0.0)) == ["r0"]


def test_the_window_is_bounded_from_the_first_waiting_arrival_and_never_extended():
    s = coalescing(4, target=3, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.000))
    plan = s.schedule(0.002)
    assert plan.rows == [] and plan.wait_s == pytest.approx(0.008)  # measured from r0's arrival
    s.add_chunk(chunk("r1", 5, t=0.008))  # an arrival does not move the deadline
    plan = s.schedule(0.008)
    assert plan.rows == [] and plan.wait_s == pytest.approx(0.002)
    assert ids(s.schedule(0.0101)) == ["r0", "r1"]  # deadline reached: below-target batch
    assert s.coalescing_waits == 1
    assert s.coalescing_wait_s == pytest.approx(0.0081)


def test_the_target_reached_inside_the_window_dispatches_at_once():
    s = coalescing(4, target=2, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.000))
    assert s.schedule(0.001).wait_s == pytest.approx(0.009)
    s.add_chunk(chunk("r1", 5, t=0.003))
    assert ids(s.schedule(0.003)) == ["r0", "r1"]


def test_each_batch_gets_a_new_window():
    s = coalescing(4, target=3, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.000))
    s.schedule(0.000)
    plan = s.schedule(0.010)
    assert ids(plan) == ["r0"]
    run_all(s, plan)
    s.add_chunk(chunk("r1", 5, t=0.050))
    plan = s.schedule(0.050)
    assert plan.wait_s == pytest.approx(0.010)  # a fresh window from r1's arrival
    assert s.coalescing_waits == 2


def test_a_chunk_left_over_by_the_budget_does_not_wait_a_second_window():
    s = CodecScheduler(num_slots=4, budget_frames=10, min_batch=3, max_wait_ms=10)
    for rid in "abcd":
        s.open(rid)
    s.add_chunk(chunk("a", 8, t=0.000))
    s.add_chunk(chunk("b", 8, t=0.001))
    plan = s.schedule(0.010)
    assert ids(plan) == ["a"]  # window expired; b does not fit
    run_all(s, plan)
    assert ids(s.schedule(0.011)) == ["b"]  # its arrival is 10 ms old: no new wait
    assert s.coalescing_waits == 0  # nothing actually waited


def test_duplicate_stale_and_finished_notifications_do_not_count_toward_the_target():
    s = coalescing(5, target=2, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.000))
    s.add_chunk(chunk("r0", 5, t=0.001))  # duplicate: r0 is already ready
    s.add_chunk(chunk("r0", 5, t=0.001))
    assert s.add_chunk(chunk("gone", 5, t=0.002)) is False  # stale: unknown request
    s.add_chunk(chunk("r1", 0, t=0.003, last=True))  # finished: bare terminal
    plan = s.schedule(0.004)
    assert plan.rows == []
    assert [(r.request_id, r.error) for r in plan.retired] == [("r1", None)]  # retired before waiting
    assert plan.wait_s == pytest.approx(0.006)  # ... without resetting the deadline
    assert s.add_chunk(chunk("r1", 5, t=0.005)) is False  # stale: r1 has ended
    plan = s.schedule(0.005)
    assert plan.rows == [] and plan.wait_s == pytest.approx(0.005)
    assert ids(s.schedule(0.010)) == ["r0"]


def test_first_and_terminal_chunks_share_the_bounded_window():
    s = coalescing(3, target=3, wait_ms=10)
    s.add_chunk(chunk("r0", 5, t=0.0))
    run_all(s, s.schedule(0.010))  # r0 has started
    s.add_chunk(chunk("r0", 3, t=1.000, last=True))  # a terminal chunk
    plan = s.schedule(1.000)
    assert plan.wait_s == pytest.approx(0.010)  # it waits like any chunk
    s.add_chunk(chunk("r1", 5, t=1.004))  # a first chunk joins the same window
    plan = s.schedule(1.004)
    assert plan.wait_s == pytest.approx(0.006)
    plan = s.schedule(1.010)
    assert ids(plan) == ["r0", "r1"]  # the batch the window waited for runs whole (rows in arrival order)
    assert [r.chunk.is_last for r in plan.rows] == [True, False]


def test_without_first_chunk_priority_first_and_steady_chunks_share_a_step_in_arrival_order():
    s = CodecScheduler(num_slots=3, budget_frames=100, first_chunk_priority=False)
    for rid in ("old", "new"):
        s.open(rid)
    s.add_chunk(chunk("old", 5, t=0.0))
    run_all(s, s.schedule(0.0))
    s.add_chunk(chunk("old", 25, t=1.0))
    s.add_chunk(chunk("new", 5, t=1.1))
    assert ids(s.schedule(1.2)) == ["old", "new"]


# -- first-chunk priority -------------------------------------------------------------


def started(s: CodecScheduler, rid: str, t: float) -> None:
    """`rid` has run its first chunk (it holds a slot)."""
    s.open(rid)
    s.add_chunk(chunk(rid, 5, t=t))
    plan = s.schedule(t)
    assert ids(plan) == [rid]
    run_all(s, plan)


def test_a_first_chunk_runs_ahead_of_older_steady_chunks_in_a_step_of_its_own():
    s = CodecScheduler(num_slots=4, budget_frames=1000)
    started(s, "a", 0.0)
    started(s, "b", 0.0)
    s.add_chunk(chunk("a", 25, t=1.0))
    s.add_chunk(chunk("b", 25, t=1.0))
    s.open("new")
    s.add_chunk(chunk("new", 5, t=1.5))  # arrived last: the old policy runs it behind a and b, in their step
    plan = s.schedule(2.0)
    assert ids(plan) == ["new"]
    run_all(s, plan)
    assert ids(s.schedule(2.1)) == ["a", "b"]


def test_first_chunks_go_first_under_the_budget():
    s = CodecScheduler(num_slots=4, budget_frames=30)
    started(s, "a", 0.0)
    s.open("n1")
    s.open("n2")
    s.add_chunk(chunk("a", 25, t=1.0))
    s.add_chunk(chunk("n1", 5, t=1.2))
    s.add_chunk(chunk("n2", 5, t=1.3))
    assert ids(s.schedule(2.0)) == ["n1", "n2"]  # oldest first would fill the budget with a (25) + n1 (5)


def test_steady_chunks_are_passed_over_by_at_most_one_step_in_a_row():
    s = CodecScheduler(num_slots=8, budget_frames=1000)
    started(s, "a", 0.0)
    s.add_chunk(chunk("a", 25, t=1.0))
    s.open("n1")
    s.add_chunk(chunk("n1", 5, t=1.1))
    plan = s.schedule(1.2)
    assert ids(plan) == ["n1"]
    run_all(s, plan)
    s.open("n2")
    s.add_chunk(chunk("n2", 5, t=1.3))  # another first chunk arrives before a's turn
    plan = s.schedule(1.4)
    assert ids(plan) == ["a", "n2"]  # a is not passed over twice: it runs now, beside the first chunk
    run_all(s, plan)
    s.add_chunk(chunk("a", 25, t=2.0))
    s.open("n3")
    s.add_chunk(chunk("n3", 5, t=2.1))
    assert ids(s.schedule(2.2)) == ["n3"]  # a new pass: the first chunk goes alone again


def test_a_new_request_counts_toward_the_target_only_while_a_slot_is_free():
    s = CodecScheduler(num_slots=2, budget_frames=100, min_batch=2, max_wait_ms=10)
    for rid in "abc":
        s.open(rid)
    s.add_chunk(chunk("a", 1, t=0))
    run_all(s, s.schedule(0.010))  # a holds slot 0 (after a window: b and c sent nothing)
    s.add_chunk(chunk("a", 1, t=1.000))
    s.add_chunk(chunk("c", 1, t=1.001))  # c takes the free slot: the target is met
    plan = s.schedule(1.001)
    assert ids(plan) == ["a", "c"]
    run_all(s, plan)
    s.add_chunk(chunk("a", 1, t=2.000))
    s.add_chunk(chunk("b", 1, t=2.000))  # b has no slot and none is free: a batch of one after the window
    plan = s.schedule(2.000)
    assert plan.rows == [] and plan.wait_s == pytest.approx(0.010)  # c holds a slot and may still send a chunk
    assert ids(s.schedule(2.010)) == ["a"]


def test_idle_slot_holders_can_make_a_batch_wait():
    s = CodecScheduler(num_slots=2, budget_frames=100, min_batch=2, max_wait_ms=10)
    for rid in "ab":
        s.open(rid)
    s.add_chunk(chunk("a", 1, t=0))
    s.add_chunk(chunk("b", 1, t=0))
    run_all(s, s.schedule(0))
    s.add_chunk(chunk("a", 1, t=1))
    assert s.schedule(1).wait_s == pytest.approx(0.010)  # b holds a slot and may send a chunk


def test_from_config_takes_the_profile_section():
    from omnicli.profile.schema import CodecStageConfig

    s = CodecScheduler.from_config(
        CodecStageConfig(
            max_num_seqs=3, max_num_batched_tokens=77, generation_min_batch_size=2, generation_max_wait_ms=5.0
        )
    )
    assert (s.num_slots, s.budget, s.min_batch, s.max_wait_s) == (3, 77, 2, 0.005)
