"""A pass's per-stage figures (omnicli/benchmark/stage_metrics.py) and where they are shown: per pass,
in-flight wall time apart from CPU seconds. The figures of a real vLLM-Omni engine:
tests/test_vllm_omni_engine.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnicli.benchmark.stage_metrics import busy_seconds, summarize
from omnicli.engine.request import EngineStats, RequestInfo

GOLDEN_BENCH = Path(__file__).parent / "fixtures" / "golden" / "bench" / "summary.json"


def info(start: float, talker_ms: float, codec_ms: float, frames: int = 10) -> RequestInfo:
    stage = {"tokens_out": frames + 1, "first_output_ms": 5.0, "started_at": start}
    return RequestInfo(stages={"talker": {**stage, "gen_time_ms": talker_ms},
                               "codec": {**stage, "gen_time_ms": codec_ms, "frames": frames}})


def test_busy_seconds_is_the_union_of_overlapping_intervals():
    assert busy_seconds([]) == 0.0
    assert busy_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == pytest.approx(4.0)


def test_overlapping_codec_requests_are_in_flight_once_and_cpu_comes_from_the_counters():
    # four requests at once, each 3 s in the codec (mostly waiting for the talker): 12 s summed, 3.5 s in flight
    infos = [info(100.0 + 0.5 * (i % 2), 2000.0, 3000.0) for i in range(4)]
    got = summarize(infos, {"talker_cpu_s": 1.5, "codec_cpu_s": 0.4}, audio_seconds=2.0)
    assert got["stage_codec_time_ms_mean"] == 3000.0
    assert got["stage_codec_busy_s"] == pytest.approx(3.5) and got["stage_talker_busy_s"] == pytest.approx(2.5)
    assert (got["stage_codec_cpu_s"], got["stage_codec_cpu_s_per_audio_s"]) == (0.4, 0.2)
    assert got["stage_talker_cpu_s_per_audio_s"] == 0.75
    # an engine whose counters have no CPU seconds: None, not 0
    assert summarize(infos)["stage_codec_cpu_s"] is None


def test_stage_counters_are_per_pass_and_summed_key_by_key():
    life = EngineStats(stages={"codec_cpu_s": 10.0, "talker_cpu_s": 30.0, "requests": 4})
    later = EngineStats(stages={"codec_cpu_s": 12.5, "talker_cpu_s": 31.0, "requests": 6})
    one_pass = later.minus(life)
    assert one_pass.stages == {"codec_cpu_s": 2.5, "talker_cpu_s": 1.0, "requests": 2}
    assert one_pass.plus(one_pass).stages["codec_cpu_s"] == 5.0
    # an engine without stages writes the counters it always wrote
    assert "stages" not in EngineStats().to_dict() and one_pass.to_dict()["stages"]["requests"] == 2


def test_stage_rows_in_the_table_and_keys_in_the_vllm_shaped_file():
    from omnicli.benchmark.outputs.table import table_rows
    from omnicli.benchmark.result_models import BenchRun, VllmRunResult
    from omnicli.benchmark.vllm_format import vllm_result

    # a native engine's run, as main wrote it
    base = BenchRun.model_validate(json.loads(GOLDEN_BENCH.read_text())["runs"][0])
    staged = BenchRun.model_validate({**base.to_dict(), "stage_codec_busy_s": 3.5, "stage_codec_cpu_s": 0.4,
                                      "stage_codec_cpu_s_per_audio_s": 0.2})
    rows = {label: value for label, _, value in table_rows(staged, (99,))}
    assert (rows["Codec stage in flight (s)"], rows["Codec stage CPU (s)"]) == ("3.50", "0.40")
    assert rows["Talker stage CPU (s)"] == "-"
    # a run without stage figures has no stage rows, unless its table shows them for another run
    assert not any("stage" in label for label, _, _ in table_rows(base, (99,)))
    assert len(table_rows(base, (99,), stages=True)) == len(table_rows(staged, (99,)))
    doc = vllm_result(staged.to_dict(), date="20261201-000000",
                      figures={"errors": [], "latencies": [], "queue_times": []})
    VllmRunResult.model_validate(doc)  # the file's one definition knows the keys
    assert doc["stage_codec_cpu_s"] == 0.4 and "stage_codec_cpu_s" in doc["key_notes"]
    assert "stage_codec_cpu_s" not in vllm_result(base.to_dict(), date="20261201-000000")["key_notes"]
