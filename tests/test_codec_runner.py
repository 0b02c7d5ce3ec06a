"""CodecRunner: attention backends, batch composition, capture-size padding, slot state."""

import numpy as np
import pytest
import torch

from omnicli.engine.codec_runner import CodecRunner, _slot_runs
from tests.codec_helpers import one_torch_thread, tiny_decoder  # noqa: F401 (autouse fixture)
from tests.codec_helpers import random_codes as codes

CONTEXTS = [3, 7, 5]



def state(runner: CodecRunner) -> list:
    return [t.clone() for t in runner.k + runner.v + runner.kpos] + [runner.positions]


def same_state(a: list, b: list) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


# Ragged steps over fragmented slots: slot -> list of chunk sizes, one per step (0: not in that step).
STEPS = {0: [5, 9, 9, 0, 2], 1: [1, 4, 0, 9, 9], 5: [9, 9, 9, 9, 1], 11: [0, 3, 9, 9, 9], 12: [2, 0, 0, 7, 9]}


def run_steps(runner: CodecRunner, steps=STEPS, only=None) -> dict[int, np.ndarray]:
    data = {s: codes(sum(sizes), s) for s, sizes in steps.items()}
    cursor = dict.fromkeys(steps, 0)
    out = {s: [] for s in steps}
    for i in range(len(next(iter(steps.values())))):
        slots = [s for s in steps if steps[s][i] and (only is None or s == only)]
        if not slots:
            continue
        chunks = [data[s][cursor[s] : cursor[s] + steps[s][i]] for s in slots]
        for s, pcm in zip(slots, runner.execute(slots, chunks)):
            out[s].append(pcm)
            cursor[s] += steps[s][i]
    return {s: np.concatenate(v) for s, v in out.items() if v}


@pytest.mark.parametrize("headroom", [False, True])
def test_sdpa_and_slot_backends_give_the_same_audio_on_ragged_batches(headroom):
    dec = tiny_decoder()
    kw = dict(max_chunk_frames=9, ring_headroom=headroom)
    sdpa = run_steps(CodecRunner(dec, 16, backend="sdpa", **kw))
    slot = run_steps(CodecRunner(dec, 16, backend="slot", **kw))
    for s in STEPS:
        assert sdpa[s].dtype == np.float32 and len(sdpa[s]) == sum(STEPS[s]) * 8
        np.testing.assert_allclose(slot[s], sdpa[s], rtol=0, atol=2e-6)


@pytest.mark.parametrize("backend", ["sdpa", "slot"])
def test_a_request_decoded_in_a_batch_sounds_as_decoded_alone(backend):
    dec = tiny_decoder()
    together = run_steps(CodecRunner(dec, 16, max_chunk_frames=9, backend=backend))
    for s in (1, 5, 12):
        alone = run_steps(CodecRunner(dec, 16, max_chunk_frames=9, backend=backend), only=s)[s]
        np.testing.assert_allclose(together[s], alone, rtol=0, atol=2e-6)


def test_capture_padding_rows_never_touch_any_slot():
    dec = tiny_decoder()
    padded = CodecRunner(dec, 8, max_chunk_frames=9, capture_sizes=[1, 4, 8])
    plain = CodecRunner(dec, 8, max_chunk_frames=9)
    assert padded.padded_batch_size(3) == 4 and padded.padded_batch_size(5) == 8 and padded.padded_batch_size(9) == 9
    chunks = [codes(5, 1), codes(9, 2), codes(2, 3)]
    for runner in (padded, plain):
        runner.execute([0, 1, 6], chunks)  # slot 0 is where a careless pad row would write
        runner.execute([1, 6, 0], [codes(3, 4), codes(9, 5), codes(1, 6)])
    assert same_state(state(padded), state(plain))
    assert padded.positions == [6, 12, 0, 0, 0, 0, 11, 0]
    for kp in padded.kpos:  # slots never used stay empty
        assert (kp[[2, 3, 4, 5, 7]] == -1).all()


@pytest.mark.parametrize("backend", ["sdpa", "slot"])
def test_capture_padding_does_not_change_the_audio(backend):
    dec = tiny_decoder()
    a = CodecRunner(dec, 4, max_chunk_frames=9, capture_sizes=[8], backend=backend).execute(
        [2, 3], [codes(5, 1), codes(9, 2)]
    )
    b = CodecRunner(dec, 4, max_chunk_frames=9, backend=backend).execute([2, 3], [codes(5, 1), codes(9, 2)])
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=0, atol=2e-6)


def test_tail_padding_frames_are_not_written_to_the_rings():
    dec = tiny_decoder()
    padded, plain = CodecRunner(dec, 2, max_chunk_frames=9), CodecRunner(dec, 2, max_chunk_frames=9)
    pcm_padded = padded.execute([1], [codes(2, 1)], pad_to_frames=9)
    pcm_plain = plain.execute([1], [codes(2, 1)])
    assert same_state(state(padded), state(plain)) and padded.positions == [0, 2]
    np.testing.assert_allclose(pcm_padded[0], pcm_plain[0], rtol=0, atol=2e-6)


def test_reset_slot_makes_a_reused_slot_decode_like_a_fresh_one():
    dec = tiny_decoder()
    used = CodecRunner(dec, 2, max_chunk_frames=9)
    used.execute([0], [codes(9, 1)])
    used.reset_slot(0)
    assert used.positions == [0, 0] and all((kp[0] == -1).all() for kp in used.kpos)
    fresh = CodecRunner(dec, 2, max_chunk_frames=9)
    assert np.array_equal(used.execute([0], [codes(4, 2)])[0], fresh.execute([0], [codes(4, 2)])[0])


def test_ring_sizes_default_to_the_contexts_and_grow_by_the_largest_chunk_with_headroom():
    dec = tiny_decoder()
    assert CodecRunner(dec, 1, max_chunk_frames=25).ring_sizes == CONTEXTS
    assert CodecRunner(dec, 1, max_chunk_frames=25, ring_headroom=True).ring_sizes == [28, 32, 30]
    runner = CodecRunner(dec, 1, max_chunk_frames=25, contexts=[2, 2, 9])
    assert runner.ring_sizes == [2, 2, 9] and runner.k[2].shape[2] == 9


def test_slot_runs_group_nearby_slots():
    assert _slot_runs([3, 0, 1, 2]) == [(0, 4, [1, 2, 3, 0])]
    assert _slot_runs([0, 20, 2]) == [(0, 3, [0, 2]), (20, 21, [1])]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(backend="triton"), "triton.*needs CUDA.*use 'sdpa' or 'slot'"),
        (dict(backend="flash"), "unknown codec_attention_backend"),
        (dict(contexts=[4, 4]), "layer_contexts needs 3 entries"),
    ],
)
def test_bad_settings_fail_with_a_clear_message(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CodecRunner(tiny_decoder(), 4, max_chunk_frames=9, **kwargs)


def test_a_chunk_longer_than_the_rings_allow_is_refused_before_touching_state():
    runner = CodecRunner(tiny_decoder(), 4, max_chunk_frames=9)
    before = state(runner)
    with pytest.raises(ValueError, match="1..9 frames"):
        runner.execute([0, 1], [codes(3, 1), codes(10, 2)])
    with pytest.raises(ValueError, match="distinct"):
        runner.execute([1, 1], [codes(3, 1), codes(3, 2)])
    assert same_state(state(runner), before)
