"""Streaming decode through the slot rings versus whole-sequence decode.

With ring headroom, chunked streaming equals `decode_full` bit for bit in
float64 (whatever the chunking and batch company) and a padded tail equals
an exact tail; with the default rings (exactly `context` entries) early
tokens of a chunk lose keys, so the output differs, deterministically.
"""

import numpy as np
import pytest
import torch

from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.models.codec import CodecDecoder
from tests.codec_helpers import one_torch_thread, random_codes  # noqa: F401 (autouse fixture)
from tests.codec_helpers import tiny_decoder as _tiny_decoder

CONTEXTS = [3, 7, 5]  # different per layer
MAX_CHUNK = 9



def tiny_decoder(dtype=torch.float64, seed: int = 0) -> CodecDecoder:
    return _tiny_decoder(dtype, seed, contexts=(4, 4, 4))


def stream(
    runner: CodecRunner, plans: dict[int, tuple[np.ndarray, list[int]]], pad_tail: int = 0
) -> dict[int, np.ndarray]:
    """Decodes several requests (slot -> (codes, chunk sizes)) in shared ragged steps."""
    cursor = {s: 0 for s in plans}
    step = {s: 0 for s in plans}
    out: dict[int, list[np.ndarray]] = {s: [] for s in plans}
    while True:
        slots, chunks, last = [], [], False
        for s, (codes, sizes) in plans.items():
            if step[s] < len(sizes):
                n = sizes[step[s]]
                slots.append(s)
                chunks.append(codes[cursor[s] : cursor[s] + n])
                last |= step[s] == len(sizes) - 1
                cursor[s] += n
                step[s] += 1
        if not slots:
            return {s: np.concatenate(v) for s, v in out.items()}
        for s, pcm in zip(slots, runner.execute(slots, chunks, pad_to_frames=pad_tail if last else 0)):
            out[s].append(pcm)


def reference(dec: CodecDecoder, codes: np.ndarray) -> np.ndarray:
    return dec.decode_full(torch.from_numpy(codes), CONTEXTS).numpy()


@pytest.mark.parametrize("backend", ["sdpa", "slot"])
def test_headroom_streaming_equals_whole_sequence_decode_in_float64(backend):
    dec = tiny_decoder()
    runner = CodecRunner(dec, 4, max_chunk_frames=MAX_CHUNK, ring_headroom=True, contexts=CONTEXTS, backend=backend)
    assert runner.ring_sizes == [c + MAX_CHUNK for c in CONTEXTS]
    a, b, c = random_codes(61, 1), random_codes(40, 2), random_codes(23, 3)
    plans = {
        2: (a, [1, 4, 9, 9, 9, 9, 9, 9, 2]),  # a ramp, steady chunks, a tail
        0: (b, [9, 9, 9, 9, 4]),
        3: (c, [5, 1, 1, 7, 9]),
    }
    got = stream(runner, plans)
    for slot, (codes, _) in plans.items():
        ref = reference(dec, codes)
        assert got[slot].dtype == np.float64 and got[slot].shape == ref.shape
        if backend == "sdpa":  # same keys, same order, same kernels: bit for bit
            assert np.array_equal(got[slot], ref), np.abs(got[slot] - ref).max()
        else:  # the ring is summed in ring order: equal within float64 rounding
            np.testing.assert_allclose(got[slot], ref, rtol=0, atol=1e-12)


def test_headroom_padded_tail_equals_exact_tail():
    dec = tiny_decoder()
    codes = random_codes(30, 4)
    plan = {1: (codes, [9, 9, 9, 3])}
    exact = stream(CodecRunner(dec, 2, max_chunk_frames=MAX_CHUNK, ring_headroom=True, contexts=CONTEXTS), plan)
    padded = stream(
        CodecRunner(dec, 2, max_chunk_frames=MAX_CHUNK, ring_headroom=True, contexts=CONTEXTS), plan, pad_tail=9
    )
    assert np.array_equal(padded[1], exact[1])
    assert np.array_equal(exact[1], reference(dec, codes))


def test_without_headroom_streaming_differs_deterministically():
    dec = tiny_decoder()
    codes = random_codes(40, 5)
    sizes = [1, 4, 9, 9, 9, 8]
    runs = []
    for _ in range(2):
        runner = CodecRunner(dec, 2, max_chunk_frames=MAX_CHUNK, contexts=CONTEXTS)
        assert runner.ring_sizes == CONTEXTS  # exactly `context` entries
        runs.append(stream(runner, {0: (codes, sizes)})[0])
    ref = reference(dec, codes)
    hop = dec.cfg.hop
    assert np.array_equal(runs[0], runs[1])  # deterministic
    # A one-frame first chunk loses nothing; the next chunk's early tokens lose keys.
    assert np.array_equal(runs[0][:hop], ref[:hop])
    assert np.abs(runs[0][hop:] - ref[hop:]).max() > 1e-3


def test_without_headroom_backends_share_the_chunk_complete_semantics():
    dec = tiny_decoder()
    codes = random_codes(40, 6)
    plan = {0: (codes, [1, 4, 9, 9, 9, 8])}
    sdpa = stream(CodecRunner(dec, 1, max_chunk_frames=MAX_CHUNK, contexts=CONTEXTS, backend="sdpa"), plan)[0]
    slot = stream(CodecRunner(dec, 1, max_chunk_frames=MAX_CHUNK, contexts=CONTEXTS, backend="slot"), plan)[0]
    np.testing.assert_allclose(slot, sdpa, rtol=0, atol=1e-12)


def test_decode_full_uses_the_given_per_layer_contexts():
    dec = tiny_decoder()
    codes = torch.from_numpy(random_codes(20, 7))
    assert not torch.equal(dec.decode_full(codes, [3, 7, 5]), dec.decode_full(codes, [3, 7, 6]))
    assert torch.equal(dec.decode_full(codes), dec.decode_full(codes, dec.cfg.contexts))


def test_upsampler_matches_its_transposed_convolutions():
    dec = tiny_decoder()
    h = torch.randn(3, 7, 32, dtype=torch.float64)
    by_conv = dec.upsample.net(h.transpose(1, 2)).squeeze(1)
    np.testing.assert_allclose(dec.upsample(h).detach().numpy(), by_conv.detach().numpy(), rtol=0, atol=1e-12)
