"""vLLM's figures of `omni bench` on hand-made records: talker token latencies, goodput, peaks, queue times."""

import pytest

from omnicli.benchmark.metrics import good_requests, parse_goodput, peak_figures, summarize, vllm_figures, vllm_lists
from omnicli.driver.records import RequestRecord
from omnicli.engine.request import RequestInfo


def rec(start, token_times, chunks, *, error=None, arrival=None, end=None):
    info = RequestInfo(prompt_tokens=5, talker_tokens=len(token_times), token_times=list(token_times),
                       first_token_at=token_times[0] if token_times else None)
    times = [t for t, _ in chunks]
    return RequestRecord("u", "id", start, end if end is not None else (times[-1] if times else start), 10, times,
                         [n for _, n in chunks], error=error, info=info, arrival=arrival)


def test_ttft_tpot_itl_are_the_talkers_as_vllm_defines_them():
    r = rec(1.0, [1.1, 1.2, 1.4], [(1.5, 10), (2.0, 10)], arrival=0.25)
    assert r.ttft == pytest.approx(0.1) and r.itl == pytest.approx([0.1, 0.2]) and r.tpot == pytest.approx(0.15)
    assert r.queue_time == pytest.approx(0.75)
    one = rec(0.0, [0.5], [(1.0, 10)])
    assert one.tpot is None and one.itl == [] and one.queue_time == 0.0
    s = summarize([[r, one]], [50])
    assert s["mean_ttft_ms"] == pytest.approx(300.0) and s["num_ttft_samples"] == 2
    assert s["mean_tpot_ms"] == pytest.approx(150.0) and s["num_tpot_samples"] == 1
    assert s["median_itl_ms"] == pytest.approx(150.0) and s["num_itl_samples"] == 2


def test_goodput_counts_successes_meeting_every_slo():
    fast = rec(0.0, [0.1, 0.2], [(0.3, 10), (0.5, 10)])  # ttft 100 ms, e2el 500 ms, rtf 0.5/2
    slow = rec(0.0, [0.9, 1.0], [(1.1, 10)])  # ttft 900 ms
    failed = rec(0.0, [0.1], [(0.2, 10)], error="boom")
    empty = rec(0.0, [0.1], [(0.2, 0)])  # no audio: a failed request, as vLLM-Omni's endpoint fails it
    one_token = rec(0.0, [0.1], [(0.2, 10)])
    assert parse_goodput(["ttft:200", "audio_rtf:0.3"]) == {"ttft": 200.0, "audio_rtf": 0.3}
    assert good_requests([fast, slow, failed, empty], {"ttft": 200}) == 1
    assert good_requests([fast, slow, failed, empty, one_token], {"ttft": 200, "audio_rtf": 0.3}) == 2
    assert good_requests([one_token, empty], {"tpot": 0.0}) == 1  # one token: TPOT 0, as vLLM counts it
    for bad in (["ttft"], ["speed:1"], ["ttft:x"], ["e2el:-1"]):
        with pytest.raises(ValueError):
            parse_goodput(bad)


def test_peaks_and_lists_follow_vllms_one_second_buckets_and_defaults():
    a = rec(0.0, [0.1, 0.2, 0.3, 1.5], [(1.6, 10)])
    b = rec(0.5, [0.9, 1.2], [(2.5, 10)])
    failed = rec(0.2, [0.4], [], error="boom", end=0.6)
    assert peak_figures([a, b, failed]) == (4.0, 2)  # 4 outputs in second 0 (failed not counted); both active in 0-1
    lists = vllm_lists([[a, failed, b]])
    assert lists["ttfts"] == pytest.approx([0.1, 0.0, 0.4]) and lists["latencies"] == pytest.approx([1.6, 0.0, 2.0])
    assert lists["itls"][1] == [] and lists["output_lens"] == [4, 0, 2] and lists["input_lens"] == [5, 5, 5]
    figures = vllm_figures([[a, failed, b]], {"e2el": 1800})
    assert figures["request_goodput"] == pytest.approx(1 / 2.5) and figures["total_audio_frames"] == 20
