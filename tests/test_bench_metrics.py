"""Benchmark formulas on synthetic timings with hand-computed answers (docs/metrics.md)."""

import math

import pytest

from omnicli.benchmark.metrics import (
    detailed_lists,
    distribution,
    parse_percentiles,
    percentile_key,
    round_duration,
    summarize,
)
from omnicli.driver.records import RequestRecord, audio_rtf, audio_ttfp, audio_underrun
from omnicli.engine.request import RequestInfo

SR = 1000  # 1 sample = 1 ms keeps the arithmetic readable


def rec(start, times, samples, *, utt="u", error=None, ref_cache="cold", finish="stop", end=None):
    return RequestRecord(
        utt=utt,
        request_id=utt,
        start=start,
        end=end if end is not None else (times[-1] if times else start),
        sample_rate=SR,
        chunk_times=list(times),
        chunk_samples=list(samples),
        error=error,
        ref_cache=ref_cache,
        finish_reason=finish,
    )


# --- per request ---


def test_ttfp_is_first_nonempty_chunk_minus_submission():
    # an empty first message does not count as audio
    assert audio_ttfp(10.0, [10.2, 10.5, 11.0], [0, 100, 100]) == pytest.approx(0.5)
    assert audio_ttfp(10.0, [10.2, 10.3], [0, 0]) is None


def test_e2el_rtf_duration_of_a_record():
    r = rec(100.0, [100.5, 101.0, 102.0], [1000, 2000, 1000])  # 4 s of audio, done after 2 s
    assert r.audio_ttfp == pytest.approx(0.5)
    assert r.e2el == pytest.approx(2.0)
    assert r.audio_duration == pytest.approx(4.0)
    assert r.audio_rtf == pytest.approx(0.5)


def test_rtf_undefined_for_empty_audio():
    assert audio_rtf(1.0, 0.0) is None
    assert rec(0.0, [0.3], [0]).audio_rtf is None


def test_underrun_single_chunk_is_zero():
    assert audio_underrun([5.0], [0.2]) == 0.0


def test_underrun_no_gap_when_chunks_arrive_before_playback_runs_dry():
    # cursor 1.5 -> 2.0 -> 2.5; every chunk arrives before the cursor
    assert audio_underrun([1.0, 1.2, 1.4], [0.5, 0.5, 0.5]) == 0.0


def test_underrun_counts_each_gap_and_restarts_the_cursor():
    # cursor=1.5; t=2.0 > 1.5: gap 0.5, cursor=2.5; t=2.5 not late: cursor=3.5;
    # t=4.0 > 3.5: gap 0.5, cursor=4.1  -> total 1.0
    assert audio_underrun([1.0, 2.0, 2.5, 4.0], [0.5, 0.5, 1.0, 0.1]) == pytest.approx(1.0)


def test_underrun_ignores_empty_chunks():
    # the empty terminal message at t=5 carries nothing to play
    assert audio_underrun([1.0, 5.0], [0.5, 0.0]) == 0.0
    # playback starts at the first chunk holding audio, not at an empty one
    assert audio_underrun([0.0, 1.0, 1.2], [0.0, 0.1, 0.1]) == pytest.approx(0.1)


def test_record_underrun_uses_sample_counts():
    r = rec(0.0, [1.0, 2.0], [500, 500])  # 0.5 s then a chunk 0.5 s late
    assert r.audio_underrun == pytest.approx(0.5)


# --- aggregates ---


def test_distribution_mean_median_std_percentiles():
    d = distribution([1, 2, 3, 4], [50, 90, 99])
    assert d["mean"] == pytest.approx(2.5)
    assert d["median"] == pytest.approx(2.5)
    assert d["std"] == pytest.approx(math.sqrt(1.25))  # population std, as vLLM
    assert d["p50"] == pytest.approx(2.5)
    assert d["p90"] == pytest.approx(3.7)  # rank 0.9*3 = 2.7 -> 3 + 0.7
    assert d["p99"] == pytest.approx(3.97)


def test_distribution_scale_and_empty():
    assert distribution([0.1, 0.3], [50], scale=1000)["mean"] == pytest.approx(200.0)
    assert distribution([], [50, 99]) == {"mean": None, "median": None, "std": None, "p50": None, "p99": None}


def test_percentile_keys_and_parsing():
    assert percentile_key(99) == "p99"
    assert percentile_key(99.9) == "p99.9"
    assert parse_percentiles("50, 90,99.9") == [50.0, 90.0, 99.9]
    for bad in ("", "50,abc", "0", "101"):
        with pytest.raises(ValueError):
            parse_percentiles(bad)


def test_round_duration_first_submission_to_last_completion():
    rounds = [rec(1.0, [2.0], [10]), rec(1.5, [4.0], [10]), rec(2.0, [], [], error="x", end=3.0)]
    assert round_duration(rounds) == pytest.approx(3.0)


def test_pooled_throughput_is_total_audio_over_total_duration():
    # round 1: 10 s of audio in 1 s (10x); round 2: 10 s in 4 s (2.5x).
    # Mean of ratios would be 6.25; docs/metrics.md pools: 20 / 5 = 4.
    r1 = [rec(0.0, [0.5, 1.0], [5000, 5000], utt="a")]
    r2 = [rec(10.0, [11.0], [4000], utt="a"), rec(10.0, [14.0], [6000], utt="b")]
    s = summarize([r1, r2], [50])
    assert s["duration"] == pytest.approx(5.0)
    assert s["round_durations"] == pytest.approx([1.0, 4.0])
    assert s["total_audio_duration_s"] == pytest.approx(20.0)
    assert s["audio_throughput"] == pytest.approx(4.0)
    assert s["request_throughput"] == pytest.approx(3 / 5.0)
    assert s["completed"] == 3


def test_failed_and_empty_requests_are_counted_not_dropped():
    ok = rec(0.0, [0.2, 1.0], [100, 900], utt="ok")  # ttfp 200 ms, e2el 1000 ms, 1 s audio
    empty = rec(0.0, [0.1], [0], utt="empty")  # success without audio
    failed = rec(0.0, [0.3], [300], utt="bad", error="boom", end=0.4)  # partial audio, then error
    s = summarize([[ok, empty, failed]], [50, 99])
    assert (s["completed"], s["failed"], s["num_nonempty_audio"], s["num_empty_audio"]) == (2, 1, 1, 1)
    # latency statistics: the non-empty success only
    assert s["mean_audio_ttfp_ms"] == pytest.approx(200.0)
    assert s["p99_e2el_ms"] == pytest.approx(1000.0)
    assert s["mean_audio_rtf"] == pytest.approx(1.0)
    # a failed request's partial audio is not throughput
    assert s["total_audio_duration_s"] == pytest.approx(1.0)
    assert s["duration"] == pytest.approx(1.0)


def test_summary_keys_follow_metrics_md_units():
    s = summarize([[rec(0.0, [0.1, 0.6], [500, 500])]], [50, 90, 99])
    for stem, unit in (
        ("audio_ttfp", "_ms"),
        ("e2el", "_ms"),
        ("audio_rtf", ""),
        ("audio_duration", "_s"),
        ("audio_underrun", "_s"),
    ):
        for stat in ("mean", "median", "std", "p50", "p90", "p99"):
            assert f"{stat}_{stem}{unit}" in s
    assert s["mean_audio_underrun_s"] == pytest.approx(0.0)
    assert s["mean_audio_duration_s"] == pytest.approx(1.0)


def test_hot_cold_and_cap_counts():
    rs = [
        rec(0, [1], [1], ref_cache="hot"),
        rec(0, [1], [1], ref_cache="cold", finish="length"),
        rec(0, [1], [1], ref_cache="hot"),
    ]
    s = summarize([rs])
    assert (s["num_ref_hot"], s["num_ref_cold"], s["num_hit_cap"]) == (2, 1, 1)


def test_token_totals_sum_the_engine_facts_of_completed_requests():
    # vLLM's total_input_tokens / total_output_tokens: talker prompt and generated tokens
    done = [rec(0.0, [1.0], [100], utt=f"u{i}") for i in range(2)]
    done[0].info = RequestInfo(prompt_tokens=7, talker_tokens=40)
    done[1].info = RequestInfo(prompt_tokens=5, talker_tokens=24)
    failed = rec(0.0, [1.0], [100], utt="f", error="boom")
    failed.info = RequestInfo(prompt_tokens=9, talker_tokens=3)
    no_info = rec(0.0, [1.0], [100], utt="n")
    s = summarize([done + [failed, no_info]])
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (12, 64)
    assert (no_info.prompt_tokens, no_info.output_tokens) == (0, 0)


def test_no_requests_gives_zero_throughput_and_null_stats():
    s = summarize([[]], [50])
    assert s["audio_throughput"] == 0.0 and s["completed"] == 0
    assert s["mean_audio_ttfp_ms"] is None


def test_detailed_lists_in_submission_order_relative_start():
    r1 = [rec(5.5, [6.0], [100], utt="b"), rec(5.0, [5.2], [100], utt="a")]
    r2 = [rec(20.0, [], [], utt="c", error="boom", end=20.5)]
    d = detailed_lists([r1, r2])
    assert d["utts"] == ["a", "b", "c"]
    assert d["request_rounds"] == [0, 0, 1]
    assert d["start_times"] == pytest.approx([0.0, 0.5, 0.0])
    assert d["audio_ttfps"][0] == pytest.approx(0.2)
    assert d["audio_ttfps"][2] is None and d["e2els"][2] is None
    assert d["errors"] == ["", "", "boom"]
    assert d["audio_durations"] == pytest.approx([0.1, 0.1, 0.0])
