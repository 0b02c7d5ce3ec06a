"""The real engine started from a profile with ring headroom and a chunk ramp on.

The unit tests of stage 1 build CodecRunner themselves; these check that the
engine passes the profile's settings through: the rings grow by the largest
chunk the request's chunker can emit (a ramp entry here), and streamed audio
equals a whole-sequence decode bit for bit in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from omnicli.engine import Engine, TTSRequest
from omnicli.profile import load_profile
from tests.conftest import DEMO_MANIFEST, TEST_PROFILE_SETS
from tests.fakes import EngineLoop

pytestmark = pytest.mark.engine

REF_WAV = DEMO_MANIFEST.parent / "prompts" / "heart_juice.wav"
# The ramp's last size (31) is larger than both other sizes, so it alone sets the headroom.
RAMP = [2, 31, 6]
STEADY = 9
PROFILE_SETS = [
    *TEST_PROFILE_SETS,
    "codec.codec_ring_headroom=true",
    f"codec.codec_chunk_ramp=[{', '.join(map(str, RAMP))}]",
    f"codec.codec_chunk_frames={STEADY}",
    "codec.initial_codec_chunk_frames=3",
    "codec.dtype=float64",
]


@pytest.fixture(scope="module")
def ramp_engine():
    harness = EngineLoop(lambda: Engine.start(load_profile("cpu", overrides=PROFILE_SETS)), name="ramp-engine-loop")
    try:
        yield harness.engine, harness.run
    finally:
        harness.close()


def test_profile_reaches_the_engine(ramp_engine):
    engine, _ = ramp_engine
    cfg = engine.profile.codec
    assert (cfg.codec_ring_headroom, cfg.codec_chunk_ramp, cfg.dtype) == (True, RAMP, "float64")
    assert engine.stats().extra["codec_ring_headroom"] is True


def test_rings_grow_by_the_largest_chunk_including_the_ramp(ramp_engine):
    engine, _ = ramp_engine
    runner = engine.codec.runner
    contexts = engine.adapter.codec.decoder.cfg.contexts
    assert runner.contexts == list(contexts)
    assert runner.ring_sizes == [c + max(RAMP) for c in contexts]


def test_streamed_audio_equals_whole_sequence_decode_in_float64(ramp_engine):
    engine, run = ramp_engine
    submitted: list[np.ndarray] = []
    submit = engine.codec.submit

    def recording_submit(request_id, codes, is_last):  # observe what the real chunker sends
        submitted.append(np.array(codes, copy=True))
        submit(request_id, codes, is_last)

    engine.codec.submit = recording_submit
    try:
        ref, sr = sf.read(REF_WAV, dtype="float32")
        text = "The boy was there when the sun rose, and a rod is used to catch pink salmon."

        async def collect():
            return [
                c async for c in engine.generate(TTSRequest("ramp", text, ref, sr, "The birch canoe slid.", seed=3))
            ]

        chunks = run(collect())
    finally:
        engine.codec.submit = submit
    sizes = [len(c) for c in submitted]
    frames = sum(sizes)
    assert frames > sum(RAMP) + 2 * STEADY  # the request runs through the ramp into steady chunks
    assert sizes[: len(RAMP)] == RAMP and all(s == STEADY for s in sizes[len(RAMP) : -1]) and 0 <= sizes[-1] <= STEADY
    hop = engine.adapter.codec.cfg.hop
    audio = [c for c in chunks if c.num_samples]
    assert [c.num_samples for c in audio] == [s * hop for s in sizes if s]

    decoder = engine.adapter.codec.decoder
    assert next(decoder.parameters()).dtype == torch.float64
    streamed = np.concatenate([c.pcm for c in chunks])
    whole = decoder.decode_full(torch.from_numpy(np.concatenate(submitted))).cpu().numpy().astype(np.float32)
    assert streamed.shape == whole.shape == (frames * hop,)
    assert np.array_equal(streamed, whole)
