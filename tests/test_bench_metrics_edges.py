"""Benchmark formulas at their edges (found by mutation testing): one-sample chunks, rates of
1 Hz, repeated gaps, failed and empty requests in the detailed lists, percentile parsing."""

import pytest

from omnicli.benchmark.metrics import detailed_lists, parse_percentiles, round_duration, summarize
from omnicli.driver.records import RequestRecord, audio_duration, audio_ttfp, audio_underrun


def record(utt, start, end, times=(), samples=(), error=None, sr=10, **kw) -> RequestRecord:
    return RequestRecord(utt, f"{utt}-id", start, end, sr, list(times), list(samples), error=error, **kw)


def test_audio_duration_at_the_edges():
    assert audio_duration(5, 1) == 5.0
    assert audio_duration(5, 0) == 0.0 and audio_duration(5, -1) == 0.0  # no rate, no duration
    assert audio_duration(0, 24000) == 0.0


def test_ttfp_counts_a_one_sample_chunk_as_audio():
    assert audio_ttfp(0.0, [1.0, 2.0, 3.0], [0, 1, 5]) == 2.0


def test_every_gap_after_playback_started_adds_up():
    # plays 0-1, waits until 2, plays 2-3, waits until 4, plays 4-5
    assert audio_underrun([0.0, 2.0, 4.0], [1.0, 1.0, 1.0]) == pytest.approx(2.0)


def test_detailed_lists_leave_out_what_does_not_exist():
    ok = record("ok", 1.0, 3.0, times=[1.5, 3.0], samples=[10, 10], ref_cache="hot", finish_reason="stop")
    empty = record("empty", 1.2, 2.0, times=[2.0], samples=[0], finish_reason="length")
    failed = record("failed", 1.1, 2.5, times=[1.4], samples=[5], error="boom")
    lists = detailed_lists([[ok, empty, failed], []])  # an empty round too
    assert lists["utts"] == ["ok", "failed", "empty"]  # submission order
    assert lists["start_times"] == pytest.approx([0.0, 0.1, 0.2])
    assert lists["audio_ttfps"] == [pytest.approx(0.5), None, None]
    assert lists["e2els"] == [pytest.approx(2.0), None, pytest.approx(0.8)]
    assert lists["audio_durations"] == [2.0, 0.5, 0.0]
    assert lists["audio_rtfs"] == [pytest.approx(1.0), None, None]
    assert lists["audio_underruns"] == [pytest.approx(0.5), None, None]  # 1.5-2.5 played, next chunk at 3.0
    assert lists["ref_caches"] == ["hot", "none", "none"]
    assert lists["finish_reasons"] == ["stop", None, "length"]
    assert lists["errors"] == ["", "boom", ""]


@pytest.mark.parametrize(
    "text, expected", [("1", [1.0]), ("100", [100.0]), ("50,,90", [50.0, 90.0]), (" 99.9 ", [99.9])]
)
def test_percentiles_accepted(text, expected):
    assert parse_percentiles(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("50,abc", "percentile 'abc' is not a number"),
        ("0", "percentile '0' must be in (0, 100]"),
        ("100.5", "percentile '100.5' must be in (0, 100]"),
        ("nan", "percentile 'nan' must be in (0, 100]"),
        (" , ", "no percentiles given"),
    ],
)
def test_percentiles_refused_with_the_reason(text, message):
    with pytest.raises(ValueError) as raised:
        parse_percentiles(text)
    assert str(raised.value) == message


def test_no_records_take_no_time():
    assert round_duration([]) == 0.0
    summary = summarize([[]])
    assert summary["duration"] == 0.0 and summary["request_throughput"] == 0.0 and summary["audio_throughput"] == 0.0


def test_throughput_over_a_short_round_and_one_sample_audio():
    rnd = [record("a", 0.0, 0.5, times=[0.5], samples=[1]), record("b", 0.0, 0.25, times=[0.25], samples=[4])]
    summary = summarize([rnd])
    assert summary["duration"] == 0.5
    assert summary["num_nonempty_audio"] == 2 and summary["num_empty_audio"] == 0
    assert summary["request_throughput"] == pytest.approx(4.0)  # 2 requests in 0.5 s
    assert summary["audio_throughput"] == pytest.approx(0.5 / 0.5)  # 0.1 s + 0.4 s of audio in 0.5 s
