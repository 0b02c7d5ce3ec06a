"""Issue 32 item 4: a request that produced no audio is a failed request, as vLLM-Omni's speech
endpoint fails it (HTTP 400 "did not produce audio output"): failed in the vLLM-shaped file, kept
in omni's `num_empty_audio`, and the bench exits 1. A fake engine stands in (tests/fakes.py's TokenEngine)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from omnicli.cli import app
from tests import vllm_readers
from tests.fakes import write_manifest

runner = CliRunner()


def test_a_run_whose_every_request_was_silent_fails_the_ci_check_and_exits_1(token_engine, tmp_path):
    m = write_manifest(tmp_path, ["empty", "empty", "empty"])
    result = runner.invoke(app, ["bench", str(m), "--save-result", "--result-dir", str(tmp_path),
                                 "--result-filename", "r.json"])
    assert result.exit_code == 1, result.output
    assert "3 request(s) produced no audio" in result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["num_prompts"] == 3 and doc["completed"] == 0 and doc["failed"] == 3
    assert doc["errors"] == ["did not produce audio output"] * 3
    assert doc["request_throughput"] == 0.0 and doc["latencies"] == [0.0] * 3
    assert doc["num_empty_audio"] == 3  # omni's own count, kept
    summary = json.loads(next(tmp_path.glob("omni-bench-*.json")).read_text())
    assert summary["runs"][0]["num_empty_audio"] == 3
    params = {"baseline": {"cpu": {"audio_throughput": [0.0]}}}
    try:
        vllm_readers.omni_ci_check(tmp_path / "r.json", params, num_prompt=3, hardware="cpu", sweep_index=0)
    except AssertionError as exc:
        assert "Request failures exist" in str(exc)
    else:
        raise AssertionError("the CI's completed == num_prompts check passed on silence")


def test_one_silent_request_among_good_ones_is_one_failure(token_engine, tmp_path):
    m = write_manifest(tmp_path, ["one two", "empty", "three"])
    result = runner.invoke(app, ["bench", str(m), "--disable-shuffle", "--save-result", "--result-dir",
                                 str(tmp_path), "--result-filename", "r.json"])
    assert result.exit_code == 1, result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["completed"] == 2 and doc["failed"] == 1
    assert sorted(doc["errors"]) == ["", "", "did not produce audio output"]
    assert doc["request_throughput"] == doc["completed"] / doc["duration"]


def test_a_run_with_audio_still_exits_0(token_engine, tmp_path):
    m = write_manifest(tmp_path, ["one two", "three"])
    result = runner.invoke(app, ["bench", str(m), "--result-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
