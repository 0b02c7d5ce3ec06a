"""The per-request Chunker: initial/steady sizes, ramps, flush and the bare terminal."""

import numpy as np
import pytest
from pydantic import ValidationError

from omnicli.engine.chunker import Chunker
from omnicli.profile.schema import CodecStageConfig

K = 4


def frames(n: int, start: int = 0) -> np.ndarray:
    return (np.arange(start, start + n)[:, None] * np.ones(K, dtype=np.int64)).astype(np.int64)


def sizes(chunks) -> list[int]:
    return [len(c) for c in chunks]


def test_initial_then_steady_sizes_and_flush():
    ch = Chunker(K, initial_frames=5, chunk_frames=25)
    out = ch.feed(frames(63))
    assert sizes(out) == [5, 25, 25]
    rest = ch.flush()
    assert len(rest) == 8
    # Frames come out in order, nothing lost or repeated.
    assert np.array_equal(np.concatenate([*out, rest])[:, 0], np.arange(63))


def test_ramp_replaces_first_sizes_and_overrides_initial():
    ch = Chunker(K, initial_frames=5, chunk_frames=25, ramp=[1, 4, 15])
    out = ch.feed(frames(100))
    assert sizes(out) == [1, 4, 15, 25, 25, 25]
    assert len(ch.flush()) == 5
    assert ch.max_chunk_frames == 25


def test_ramp_progresses_per_request_independently():
    a = Chunker(K, 5, 25, ramp=[1, 4, 15])
    b = Chunker(K, 5, 25, ramp=[1, 4, 15])
    assert sizes(a.feed(frames(5))) == [1, 4]
    # b starts at the beginning of the ramp whatever a did.
    assert sizes(b.feed(frames(1))) == [1]
    assert sizes(a.feed(frames(15))) == [15]
    assert sizes(b.feed(frames(4))) == [4]
    assert a.next_size() == 25 and b.next_size() == 15


def test_feeding_piecewise_gives_the_same_chunks_as_at_once():
    whole = Chunker(K, 3, 7, ramp=[2, 5])
    expected = whole.feed(frames(40)) + [whole.flush()]
    piece = Chunker(K, 3, 7, ramp=[2, 5])
    got = []
    start = 0
    for n in [1, 1, 3, 0, 9, 2, 11, 13]:
        got += piece.feed(frames(n, start))
        start += n
    got.append(piece.flush())
    assert sizes(got) == sizes(expected)
    assert all(np.array_equal(x, y) for x, y in zip(got, expected))


def test_empty_terminal_carries_no_codes():
    ch = Chunker(K, 2, 4)
    assert sizes(ch.feed(frames(6))) == [2, 4]
    last = ch.flush()
    assert last.shape == (0, K)
    assert ch.chunks_emitted == 2  # an empty terminal is not a chunk of audio


def test_a_steady_size_larger_than_the_input_flushes_everything_as_the_tail():
    ch = Chunker(K, 10, 25)
    assert ch.feed(frames(7)) == []
    assert len(ch.flush()) == 7


# The sizes are validated by the profile schema (the Chunker takes them as given): the
# rules live there, and these tests hold them.
@pytest.mark.parametrize(
    ("fields", "key", "reason"),
    [
        ({"initial_codec_chunk_frames": 0}, "initial_codec_chunk_frames", "greater than or equal to 1"),
        ({"codec_chunk_frames": 0}, "codec_chunk_frames", "greater than or equal to 1"),
        ({"codec_chunk_ramp": []}, "codec_chunk_ramp", "codec_chunk_ramp must not be empty"),
        ({"codec_chunk_ramp": [1, 0]}, "codec_chunk_ramp", "every entry of codec_chunk_ramp must be >= 1"),
    ],
)
def test_invalid_sizes_are_rejected_by_the_profile_schema_with_the_key(fields, key, reason):
    with pytest.raises(ValidationError) as caught:
        CodecStageConfig(**fields)
    (error,) = caught.value.errors()
    assert error["loc"] == (key,) and reason in error["msg"]


def test_sizes_of_one_frame_are_allowed_and_zero_is_refused():
    ch = Chunker.from_config(
        K, CodecStageConfig(initial_codec_chunk_frames=1, codec_chunk_frames=1, codec_chunk_ramp=[1])
    )
    assert sizes(ch.feed(frames(3))) == [1, 1, 1]
    for key in ("initial_codec_chunk_frames", "codec_chunk_frames"):
        with pytest.raises(ValidationError) as caught:
            CodecStageConfig(**{key: 0})
        (error,) = caught.value.errors()
        assert error["loc"] == (key,) and error["type"] == "greater_than_equal" and error["ctx"]["ge"] == 1


def test_codes_come_out_as_int64_whatever_they_went_in_as():
    ch = Chunker(K, initial_frames=2, chunk_frames=3)
    out = ch.feed(frames(4).astype(np.float64)) + ch.feed(frames(1, 4).astype(np.int32))
    rest = ch.flush()
    assert [c.dtype for c in out] == [np.int64, np.int64] and rest.dtype == np.int64
    assert Chunker(K, 2, 3).flush().dtype == np.int64  # the bare terminal too
    assert np.array_equal(np.concatenate([*out, rest])[:, 0], np.arange(5))


def test_flush_empties_the_buffer_and_counts_one_chunk():
    ch = Chunker(K, initial_frames=2, chunk_frames=5, ramp=[2, 3, 4])
    assert sizes(ch.feed(frames(3))) == [2] and ch.chunks_emitted == 1
    assert len(ch.flush()) == 1 and ch.chunks_emitted == 2
    assert ch.next_size() == 4  # the partial chunk took the ramp's second place
    assert len(ch.flush()) == 0 and ch.chunks_emitted == 2  # nothing left: the bare terminal, not a chunk
    assert sizes(ch.feed(frames(4, 3))) == [4]  # nothing stale came back after the flush


def test_from_config_takes_the_profile_section():
    ch = Chunker.from_config(
        K, CodecStageConfig(initial_codec_chunk_frames=2, codec_chunk_frames=3, codec_chunk_ramp=[1, 2])
    )
    assert [len(c) for c in ch.feed(np.zeros((9, K), np.int64))] == [1, 2, 3, 3]
