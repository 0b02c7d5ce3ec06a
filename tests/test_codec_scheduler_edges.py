"""CodecScheduler edge rules the main tests leave open (found by mutation testing):
settings at their limits, return values, windows that outlive their first waiter."""

import numpy as np
import pytest
from pydantic import ValidationError

from omnicli.engine.codec_scheduler import Chunk, CodecScheduler
from omnicli.profile.schema import CodecStageConfig

K = 2


def chunk(rid: str, frames: int, t: float = 0.0, last: bool = False) -> Chunk:
    return Chunk(rid, np.zeros((frames, K), dtype=np.int64), last, t)


def deliver(s: CodecScheduler, plan) -> None:
    for r in plan.rows:
        s.complete(r.request_id)


def test_settings_at_their_limits():
    # The scheduler takes what the profile schema validated; the limits are the schema's rules.
    s = CodecScheduler.from_config(CodecStageConfig(max_num_seqs=1, max_num_batched_tokens=1))
    assert (s.num_slots, s.budget, s.min_batch, s.max_wait_s) == (1, 1, 1, 0.0)


@pytest.mark.parametrize(
    ("field", "value", "error_type"),
    [
        ("max_num_seqs", 0, "greater_than_equal"),
        ("max_num_seqs", 2.5, "int_type"),
        ("max_num_batched_tokens", 0, "greater_than_equal"),
        ("generation_min_batch_size", 0, "greater_than_equal"),
        ("generation_max_wait_ms", True, "float_type"),
        ("generation_max_wait_ms", -1.0, "greater_than_equal"),
        ("generation_max_wait_ms", float("inf"), "finite_number"),
        ("generation_max_wait_ms", float("nan"), "finite_number"),
    ],
)
def test_settings_past_their_limits_are_refused_by_the_profile_schema(field, value, error_type):
    with pytest.raises(ValidationError) as caught:
        CodecStageConfig(**{field: value})
    (error,) = caught.value.errors()
    assert error["loc"] == (field,) and error["type"] == error_type


def test_without_a_wait_setting_nothing_waits():
    s = CodecScheduler(num_slots=2, budget_frames=10, min_batch=2)  # max_wait_ms defaults to 0
    s.open("a")
    s.open("b")
    s.add_chunk(chunk("a", 3))
    plan = s.schedule(0.0)
    assert [r.request_id for r in plan.rows] == ["a"] and plan.wait_s is None


def test_a_one_second_window_waits_one_second():
    s = CodecScheduler(num_slots=2, budget_frames=10, min_batch=2, max_wait_ms=1000)
    s.open("a")
    s.open("b")
    s.add_chunk(chunk("a", 3, t=0.0))
    assert s.schedule(0.0).wait_s == pytest.approx(1.0)


def holders(n: int, min_batch: int, slots: int | None = None) -> CodecScheduler:
    """n requests that each ran one chunk and now hold a slot with nothing ready."""
    s = CodecScheduler(num_slots=slots or n, budget_frames=100, min_batch=min_batch, max_wait_ms=10)
    for i in range(n):
        s.open(f"h{i}")
        s.add_chunk(chunk(f"h{i}", 1, t=0.0))
    plan = s.schedule(1.0)  # waiting cannot reach more than all of them: dispatch
    assert len(plan.rows) == n
    deliver(s, plan)
    return s


def test_idle_slot_holders_count_one_each_toward_the_target():
    s = holders(3, min_batch=3)  # one ready + two idle holders can make 3: wait
    s.add_chunk(chunk("h0", 1, t=2.0))
    assert s.schedule(2.0).wait_s == pytest.approx(0.01)
    s = holders(2, min_batch=2, slots=3)  # one ready + one idle holder make 2: wait
    s.add_chunk(chunk("h0", 1, t=2.0))
    assert s.schedule(2.0).wait_s == pytest.approx(0.01)
    s = holders(2, min_batch=3, slots=3)  # one ready + one idle holder cannot make 3: go
    s.add_chunk(chunk("h0", 1, t=2.0))
    assert [r.request_id for r in s.schedule(2.0).rows] == ["h0"]


def test_coalescing_time_adds_up_over_windows():
    s = CodecScheduler(num_slots=4, budget_frames=100, min_batch=2, max_wait_ms=10)
    for rid in ("a", "b"):
        s.open(rid)
    s.add_chunk(chunk("a", 1, t=0.0))
    assert s.schedule(0.0).wait_s == pytest.approx(0.01)
    deliver(s, s.schedule(0.004 + 0.006))  # the window closes at its deadline
    s.add_chunk(chunk("a", 1, t=1.0))
    assert s.schedule(1.0).wait_s == pytest.approx(0.01)
    s.add_chunk(chunk("b", 1, t=1.003))
    assert len(s.schedule(1.003).rows) == 2  # the target reached: the window closes early
    assert s.coalescing_waits == 2 and s.coalescing_wait_s == pytest.approx(0.01 + 0.003)


def test_a_window_whose_waiters_all_left_closes_at_the_next_look():
    s = CodecScheduler(num_slots=4, budget_frames=100, min_batch=2, max_wait_ms=10)
    s.open("a")
    s.open("b")
    s.add_chunk(chunk("a", 1, t=0.0))
    assert s.schedule(0.0).wait_s is not None
    s.cancel("a")
    plan = s.schedule(0.002)
    assert plan.rows == [] and plan.wait_s is None
    assert s.coalescing_wait_s == pytest.approx(0.002)


def test_the_window_stays_anchored_when_its_first_waiter_is_cancelled():
    s = CodecScheduler(num_slots=8, budget_frames=100, min_batch=3, max_wait_ms=10)
    for rid in "abcd":
        s.open(rid)
    s.add_chunk(chunk("a", 1, t=0.0))
    assert s.schedule(0.0).wait_s == pytest.approx(0.01)
    s.add_chunk(chunk("b", 1, t=0.005))
    s.cancel("a")
    assert s.schedule(0.006).wait_s == pytest.approx(0.004)  # still the deadline set at 0.0


def test_a_chunk_of_exactly_the_budget_runs():
    s = CodecScheduler(num_slots=1, budget_frames=10)
    s.open("a")
    s.add_chunk(chunk("a", 10, last=True))
    plan = s.schedule(0.0)
    assert plan.retired == [] and [r.chunk.frames for r in plan.rows] == [10]


def test_a_request_in_flight_does_not_hold_up_retiring_others():
    s = CodecScheduler(num_slots=2, budget_frames=10)
    s.open("a")
    s.open("b")
    s.add_chunk(chunk("a", 5))
    assert [r.request_id for r in s.schedule(0.0).rows] == ["a"]  # a is in flight
    s.add_chunk(chunk("b", 0, last=True))  # b ends without audio
    s.add_chunk(chunk("a", 50))  # and a's next chunk is oversized, but a is in flight
    plan = s.schedule(0.1)
    assert [(r.request_id, r.error) for r in plan.retired] == [("b", None)]


def test_add_chunk_says_whether_the_chunk_was_queued():
    s = CodecScheduler(num_slots=1, budget_frames=100)
    assert s.add_chunk(chunk("unknown", 3)) is False
    s.open("a")
    assert s.add_chunk(chunk("a", 0)) is False  # an empty chunk that ends nothing
    assert s.add_chunk(chunk("a", 3)) is True
    assert s.add_chunk(chunk("a", 0, last=True)) is True  # a bare terminal behind audio
    assert s.add_chunk(chunk("a", 2)) is False  # after the end
    assert s.queued_frames("a") == [3]
    s.open("b")
    assert s.add_chunk(chunk("b", 0, last=True)) is True
    assert s.queued_frames("b") == [0]


def test_a_bare_terminal_marks_only_the_last_queued_chunk_as_last():
    s = CodecScheduler(num_slots=1, budget_frames=4)
    s.open("a")
    for n in (2, 3, 4):
        s.add_chunk(chunk("a", n))
    s.add_chunk(chunk("a", 0, last=True))
    assert s.queued_frames("a") == [2, 3, 4]
    lasts = []
    for t in range(3):
        plan = s.schedule(float(t))
        lasts += [r.chunk.is_last for r in plan.rows]
        deliver(s, plan)
    assert lasts == [False, False, True]
    assert s.active == 0 and s.free_slots == [0]  # the last audio ended the request


def test_a_one_frame_last_chunk_behind_audio_is_queued_not_merged():
    s = CodecScheduler(num_slots=1, budget_frames=10)
    s.open("a")
    s.add_chunk(chunk("a", 2))
    s.add_chunk(chunk("a", 1, last=True))
    assert s.queued_frames("a") == [2, 1]


def test_unknown_requests_have_no_queue_and_no_slot():
    s = CodecScheduler(num_slots=1, budget_frames=10)
    assert s.queued_frames("nope") == [] and s.slot_of("nope") is None
    assert s.complete("nope") is None and s.cancel("nope") is None
