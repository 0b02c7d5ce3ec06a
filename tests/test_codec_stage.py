"""CodecStage: the loop around scheduler and runner (policies, retirement, delivery, failures)."""

import threading

import numpy as np
import pytest
import torch

from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import CodecScheduler
from omnicli.engine.codec_stage import FIXED_IDLE_POLL_S, FIXED_POLL_S, CodecStage, Wait
from tests.codec_helpers import one_torch_thread, tiny_decoder  # noqa: F401 (autouse fixture)
from tests.codec_helpers import random_codes as codes


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Outbox:
    """Collects deliveries; `wait_last(rid)` blocks until a request's final message."""

    def __init__(self):
        self.items: list[tuple[str, np.ndarray, bool, str | None]] = []
        self._cond = threading.Condition()

    def __call__(self, rid, pcm, is_last, error):
        with self._cond:
            self.items.append((rid, pcm, is_last, error))
            self._cond.notify_all()

    def of(self, rid):
        return [(pcm, last, err) for r, pcm, last, err in self.items if r == rid]

    def wait_last(self, rid, timeout=20.0):
        with self._cond:
            assert self._cond.wait_for(lambda: any(last for _, last, _ in self.of(rid)), timeout), f"{rid} never ended"


def make_stage(
    policy="fixed",
    *,
    slots=4,
    budget=100,
    target=1,
    wait_ms=0.0,
    dtype=torch.float32,
    headroom=False,
    clock=None,
    pad=0,
):
    runner = CodecRunner(tiny_decoder(dtype), slots, max_chunk_frames=9, ring_headroom=headroom)
    scheduler = CodecScheduler(slots, budget, target, wait_ms)
    out = Outbox()
    kw = dict(clock=clock) if clock else {}
    return CodecStage(runner, scheduler, out, policy=policy, pad_tail_frames=pad, **kw), out


def test_from_config_reads_policy_threads_and_tail_padding_from_the_profile_section():
    from omnicli.profile.schema import CodecStageConfig

    runner = CodecRunner(tiny_decoder(), 2, max_chunk_frames=9)
    cfg = CodecStageConfig(
        generation_coalescing_policy="idle_wait", threads=2, codec_chunk_frames=7, codec_pad_tail=True
    )
    stage = CodecStage.from_config(runner, CodecScheduler.from_config(cfg), Outbox(), cfg)
    assert (stage._policy, stage._threads, stage._pad_tail_frames) == ("idle_wait", 2, 7)


@pytest.mark.parametrize(
    ("policy", "in_window", "idle"),
    [
        (
            "fixed",
            Wait(FIXED_POLL_S, False),
            Wait(FIXED_IDLE_POLL_S, True),
        ),  # sleeps in ticks; polls the inbox when idle
        ("idle_wait", Wait(0.010, True), Wait(None, True)),  # blocks on the inbox until an arrival or the deadline
    ],
)
def test_policies_wait_as_specified(policy, in_window, idle):
    clock = Clock()
    stage, out = make_stage(policy, target=2, wait_ms=12, clock=clock)
    for rid in "ab":
        stage.open(rid)
    assert stage.cycle() == idle  # nothing runnable
    stage.submit("a", codes(5), False)
    clock.t += 0.002
    wait = stage.cycle()
    assert wait.on_inbox == in_window.on_inbox and wait.seconds == pytest.approx(in_window.seconds)
    assert out.items == [] and stage.steps == 0
    clock.t += 0.010  # the window closes 12 ms after a's arrival
    assert stage.cycle() == Wait(0.0, False)
    assert [(r, len(p), last) for r, p, last, _ in out.items] == [("a", 40, False)]


def test_finished_requests_are_retired_before_waiting_without_moving_the_deadline():
    clock = Clock()
    stage, out = make_stage("idle_wait", target=2, wait_ms=10, clock=clock)
    for rid in "abc":
        stage.open(rid)
    stage.submit("a", codes(5), False)
    clock.t += 0.004
    stage.submit("c", np.zeros((0, 2), np.int64), True)  # c ends with a bare terminal
    wait = stage.cycle()
    assert [(r, len(p), last, err) for r, p, last, err in out.items] == [("c", 0, True, None)]
    assert wait.seconds == pytest.approx(0.006) and stage.steps == 0


def test_stage_streams_equal_whole_sequence_decode_and_an_oversized_chunk_errors_after_valid_audio():
    stage, out = make_stage("idle_wait", slots=2, budget=9, dtype=torch.float64, headroom=True)
    dec = stage.runner.decoder
    a, b = codes(30, 1), codes(17, 2)
    stage.start()
    try:
        for rid in ("a", "b", "bad"):
            stage.open(rid)
        for i in range(0, 30, 9):
            stage.submit("a", a[i : i + 9], False)
        stage.submit("a", a[:0], True)
        stage.submit("bad", codes(4), False)
        stage.submit("bad", codes(12), False)  # larger than the 9-frame budget
        stage.submit("bad", codes(3), True)  # stale after the error
        for i, n in ((0, 1), (1, 4), (5, 9), (14, 3)):
            stage.submit("b", b[i : i + n], i == 14)
        for rid in ("a", "b", "bad"):
            out.wait_last(rid)
    finally:
        stage.close()
    assert not stage.alive and stage.failure is None
    for rid, data in (("a", a), ("b", b)):
        msgs = out.of(rid)
        assert [last for _, last, _ in msgs] == [False] * (len(msgs) - 1) + [True]
        assert all(err is None for _, _, err in msgs)
        pcm = np.concatenate([p for p, _, _ in msgs])
        ref = dec.decode_full(torch.from_numpy(data)).numpy().astype(np.float32)
        assert np.array_equal(pcm, ref)
    bad = out.of("bad")
    assert [(len(p), last) for p, last, _ in bad] == [(32, False), (0, True)]  # valid audio first, then one error
    assert "12 frames" in bad[1][2] and "max_num_batched_tokens=9" in bad[1][2]
    assert len(stage.scheduler.free_slots) == 2 and stage.scheduler.active == 0
    assert stage.rows == 4 + 4 + 1 and stage.frames == 30 + 17 + 4


def test_cancel_frees_the_slot_and_its_state():
    stage, out = make_stage()
    stage.open("a")
    stage.submit("a", codes(5), False)
    stage.cycle()
    slot_state = [kp[0].clone() for kp in stage.runner.kpos]
    assert all((s >= 0).any() for s in slot_state) and len(stage.scheduler.free_slots) == 3
    stage.cancel("a")
    stage.cycle()
    assert len(stage.scheduler.free_slots) == 4 and stage.runner.positions[0] == 0
    assert all((kp[0] == -1).all() for kp in stage.runner.kpos)
    stage.submit("a", codes(5), True)  # stale: dropped
    stage.cycle()
    assert len(out.items) == 1


def test_a_failed_step_fails_only_the_request_that_causes_it():
    stage, out = make_stage(budget=100)
    for rid in "ab":
        stage.open(rid)
    stage.submit("a", codes(12), False)  # longer than the runner's 9-frame rings: its row raises
    stage.submit("b", codes(3), False)
    stage.cycle()
    assert {r: (last, err is not None) for r, _, last, err in out.items} == {"a": (True, True), "b": (False, False)}
    assert "codec step failed" in out.of("a")[0][2]
    assert len(stage.scheduler.free_slots) == 3 and stage.scheduler.slot_of("b") is not None
    stage.open("c")
    stage.submit("c", codes(3), True)
    stage.cycle()
    assert out.of("c")[0][2] is None and len(out.of("c")[0][0]) == 24


def test_a_fault_injected_in_one_row_fails_that_request_alone_and_the_others_stream_on():
    """The step holding the bad row is re-run row by row: only that request fails, and the
    others' audio (this chunk and the next) equals a run that never saw the fault."""
    stage, out = make_stage(slots=4, dtype=torch.float64, headroom=True)
    clean, out_clean = make_stage(slots=4, dtype=torch.float64, headroom=True)
    real = stage.runner.execute
    bad_slot: list[int] = []

    def execute(slots, chunks, pad_to_frames=0, last=None):
        if bad_slot[0] in slots:
            raise RuntimeError("injected row fault")
        return real(slots, chunks, pad_to_frames, last)

    stage.runner.execute = execute
    data = {rid: codes(8, seed) for seed, rid in enumerate("abc")}
    for st in (stage, clean):
        for rid in "abc":
            st.open(rid)
            st.submit(rid, data[rid][:4], False)
    bad_slot.append(1)  # "b" takes slot 1 (lowest free first, in arrival order)
    stage.cycle()
    clean.cycle()
    assert stage.scheduler.slot_of("b") is None and clean.scheduler.slot_of("b") == 1
    b_msgs = out.of("b")
    assert len(b_msgs) == 1 and b_msgs[0][1] is True and "injected row fault" in b_msgs[0][2]
    for st in (stage, clean):
        for rid in "ac":
            st.submit(rid, data[rid][4:], True)
        st.cycle()
    for rid in "ac":
        got, want = out.of(rid), out_clean.of(rid)
        assert [(last, err) for _, last, err in got] == [(False, None), (True, None)]
        for (p, _, _), (q, _, _) in zip(got, want):
            np.testing.assert_allclose(p, q, rtol=0, atol=1e-12)
    assert len(stage.scheduler.free_slots) == 4


def test_tail_padding_gives_the_same_audio():
    plain, out_plain = make_stage()
    padded, out_padded = make_stage(pad=9)
    for stage in (plain, padded):
        stage.open("a")
        stage.submit("a", codes(9, 1), False)
        stage.submit("a", codes(2, 2), True)
        stage.cycle()
        stage.cycle()
    for (_, p, last, _), (_, q, last2, _) in zip(out_plain.items, out_padded.items):
        assert last == last2
        np.testing.assert_allclose(p, q, rtol=0, atol=2e-6)
    assert [len(p) for _, p, _, _ in out_padded.items] == [72, 16]
