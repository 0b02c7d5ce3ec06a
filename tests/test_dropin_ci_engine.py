"""vLLM-Omni's perf CI command line (tests/dfx/perf/tests/test_tts.json, Qwen3-TTS voice clone,
latency phase) run through `omni bench` on the real omni-tiny engine, and the CI's threshold
check (tests/vllm_readers.py) on the file it wrote."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

import omnicli.benchmark.entrypoint as bench_entry
from omnicli.cli import app
from tests import vllm_readers
from tests.conftest import DEMO_MANIFEST
from tests.fakes import CrossLoopEngine

pytestmark = pytest.mark.engine
runner = CliRunner()

# One benchmark_params entry of vLLM-Omni's test_tts.json as it stands, but for its dataset (a Hub
# id there, a local seed-tts-eval folder here) and its size (20 prompts there; 3 on a 2-core CPU).
# Its baselines are H100 figures; the ones below are set for omni-tiny on any CPU.
CI_PARAMS = {
    "task": "voice_clone", "eval_phase": "latency", "dataset_name": "seed-tts", "backend": "openai-audio-speech",
    "endpoint": "/v1/audio/speech", "dataset_path": None, "num_prompts": [3], "max_concurrency": [1],
    "seed_tts_locale": "en", "percentile-metrics": "ttft,e2el,audio_rtf,audio_ttfp,audio_duration",
    "baseline": {"cpu": {"median_audio_ttfp_ms": [60_000.0], "median_audio_rtf": [50.0], "audio_throughput": [0.001]}},
}


def test_vllm_omni_ci_command_line_and_threshold_check(engine_harness, monkeypatch, tmp_path):
    async def start(resolved):
        return CrossLoopEngine(engine_harness)

    monkeypatch.setattr(bench_entry, "start_engine", start)
    dataset = tmp_path / "seed-tts-eval"
    shutil.copytree(DEMO_MANIFEST.parent, dataset / "en")
    params = {**CI_PARAMS, "dataset_path": str(dataset)}
    args = vllm_readers.omni_ci_command(params, host="127.0.0.1", port=8091, result_dir=str(tmp_path / "tests"),
                                        result_filename="result_test_qwen3_tts_base_seed-tts_1_3_inna_outna.json",
                                        concurrency=1, num_prompt=3)
    monkeypatch.setenv("VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S", "0.05")  # vLLM-Omni's, honoured
    result = runner.invoke(app, ["bench", "--omni", *args])  # the CI runs `vllm bench serve --omni ARGS`
    assert result.exit_code == 0, result.output
    assert "--omni: vLLM-Omni's benchmark mode" in result.output  # issue 32 item 1: accepted, said once
    path = tmp_path / "tests" / "result_test_qwen3_tts_base_seed-tts_1_3_inna_outna.json"
    thresholds = vllm_readers.omni_ci_check(path, params, num_prompt=3, hardware="cpu", sweep_index=0)
    assert set(thresholds) == {"median_audio_ttfp_ms", "median_audio_rtf", "audio_throughput"}
    doc = json.loads(path.read_text())
    # the talker's first token comes before the first audio, which comes before the end
    assert 0 < doc["median_ttft_ms"] < doc["median_audio_ttfp_ms"] < doc["median_e2el_ms"]
    assert doc["num_ttft_samples"] == 3 and "mean_tpot_ms" not in doc  # --percentile-metrics picks the statistics
    assert doc["warmup_requests"] == 2 and doc["num_prompts"] == doc["completed"] == 3
    assert sum(doc["latencies"]) == pytest.approx(doc["mean_e2el_ms"] * 3 / 1000)
    # issue 32 item 3: continuity under vLLM-Omni's and sglang-omni's names, the threshold from the environment
    assert doc["audio_continuity_threshold_s"] == 0.05
    rates = [doc[f"audio_continuity_{k}_rate"] for k in ("ok", "c50", "c100", "c200")]
    assert all(r in (0.0, 1 / 3, 2 / 3, 1.0) for r in rates) and rates[0] == rates[1] <= rates[2] <= rates[3]
    assert doc["p95_inter_chunk_gap_ms"] > 0
    with pytest.raises(AssertionError, match="median_audio_rtf"):  # the CI's check bites on a slower run
        vllm_readers.omni_ci_check(path, {"baseline": {"cpu": {"median_audio_rtf": [doc["median_audio_rtf"] / 2]}}},
                                   num_prompt=3, hardware="cpu", sweep_index=0)
