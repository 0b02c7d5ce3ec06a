"""`omni bench` as a drop-in for `vllm bench serve` result files, the CSV export and `--format text`."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

import omnicli.benchmark.entrypoint as bench_entry
from omnicli.benchmark.vllm_format import (
    parse_metadata,
    parse_percentile_metrics,
    read_results,
    result_filename,
    vllm_result,
    write_result,
)
from omnicli.cli import app

runner = CliRunner()

# The top-level keys of `vllm bench serve --save-result` whose meaning omni shares (vLLM 0.11+).
VLLM_KEYS = {
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "errors",
    "mean_e2el_ms",
    "median_e2el_ms",
    "std_e2el_ms",
    "p99_e2el_ms",
}
# vLLM-Omni's audio keys.
OMNI_AUDIO_KEYS = {
    "audio_throughput",
    "mean_audio_ttfp_ms",
    "p99_audio_ttfp_ms",
    "mean_audio_rtf",
    "p99_audio_rtf",
    "mean_audio_duration_s",
}


def test_metadata_parsing_follows_vllm():
    assert parse_metadata(["version=0.3.3", " tp = 1 ", "expr=a=b"]) == {"version": "0.3.3", "tp": "1", "expr": "a=b"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_metadata(["novalue"])
    assert parse_percentile_metrics("e2el, audio_ttfp") == ["e2el", "audio_ttfp"]
    assert parse_percentile_metrics("ttft,tpot,itl,e2el") == ["ttft", "tpot", "itl", "e2el"]  # what vLLM's sweep passes
    with pytest.raises(ValueError, match="'goodput'"):
        parse_percentile_metrics("ttft,goodput")


def test_result_shape_file_name_and_append(tmp_path):
    run = {"model": "org/omni-tiny", "num_prompts": 4, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 8,
           "duration": 2.0, "completed": 3, "failed": 1, "total_input_tokens": 40, "total_output_tokens": 100,
           "request_throughput": 1.5, "audio_throughput": 3.0, "mean_e2el_ms": 10.0, "p99_e2el_ms": 20.0,
           "mean_audio_rtf": 0.5, "profile_label": "default"}
    doc = vllm_result(run, date="20260101-120000", metadata={"tp": "1"}, percentile_metrics=["e2el"], percentiles=[99],
                      detailed={"errors": [None, "boom", None, None]})
    assert doc["backend"] == doc["label"] == "omni" and doc["model_id"] == "org/omni-tiny" and doc["tp"] == "1"
    assert doc["output_throughput"] == 0.0 and doc["total_token_throughput"] == 0.0  # no text tokens (key_notes)
    assert doc["talker_output_throughput"] == 50.0 and doc["talker_prompt_tokens"] == 40
    assert doc["errors"] == ["", "boom", "", ""] and doc["p99_e2el_ms"] == 20.0
    assert doc["median_e2el_ms"] == 0.0 and doc["num_e2el_samples"] == 0  # absent: 0.0, as vLLM
    assert "mean_audio_rtf" not in doc  # not selected by --percentile-metrics
    assert result_filename(doc) == "omni-infqps-concurrency8-omni-tiny-20260101-120000.json"
    assert result_filename({**doc, "request_rate": 4, "max_concurrency": None}, profile_label="a#2") == \
        "omni-a_2-4.0qps-omni-tiny-20260101-120000.json"
    path = write_result(tmp_path / "r.json", doc)
    write_result(path, {**doc, "max_concurrency": 16}, append=True)
    assert [d["max_concurrency"] for d in read_results(path)] == [8, 16]
    assert [json.loads(line)["max_concurrency"] for line in path.read_text().splitlines()] == [8, 16]  # one per line
    assert path.read_text() == json.dumps(doc) + "\n" + json.dumps({**doc, "max_concurrency": 16})  # as vLLM appends


@pytest.fixture
def fake_engine(monkeypatch):
    from tests.fakes import FakeEngine

    async def start(resolved):
        return FakeEngine()

    monkeypatch.setattr(bench_entry, "start_engine", start)


def test_save_result_writes_one_vllm_file_per_run_beside_the_summary(fake_engine, tmp_path):
    out = tmp_path / "res"
    result = runner.invoke(app, [
        "bench", "--max-concurrency", "1,2", "-n", "3", "--num-warmups", "1", "--save-result", "--result-dir", str(out),
        "--label", "mylab", "--metadata", "version=0.3", "--metadata", "tp=1", "--csv", str(tmp_path / "t.csv"),
        "--format", "text",
    ])
    assert result.exit_code == 0, result.output
    files = sorted(out.glob("mylab-*.json"))
    assert len(files) == 2 and all("-infqps-concurrency" in f.name and "-fake-" in f.name for f in files)
    docs = sorted((read_results(f)[0] for f in files), key=lambda d: d["max_concurrency"])
    for doc, c in zip(docs, (1, 2)):
        assert VLLM_KEYS | OMNI_AUDIO_KEYS <= set(doc), sorted(VLLM_KEYS | OMNI_AUDIO_KEYS - set(doc))
        assert (doc["label"], doc["max_concurrency"], doc["completed"], doc["failed"]) == ("mylab", c, 3, 0)
        assert doc["version"] == "0.3" and doc["tp"] == "1" and doc["request_rate"] == "inf"
        assert doc["errors"] == ["", "", ""] and doc["profile_digest"]
        assert doc["audio_throughput"] > 0 and doc["p99_audio_ttfp_ms"] > 0
    assert docs[0]["warmup_requests"] == 1  # warmup runs once per engine, before the first pass
    summaries = list(out.glob("omni-bench-*.json"))
    assert len(summaries) == 1 and len(json.loads(summaries[0].read_text())["runs"]) == 2
    # --format text: plain `Key: value` lines on stdout, one block per run
    assert "== default c=1 ==" in result.stdout and "== default c=2 ==" in result.stdout
    assert "Completed / failed: 3 / 0" in result.stdout and "┃" not in result.stdout
    with open(tmp_path / "t.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["max_concurrency"] for r in rows] == ["1", "2"] and float(rows[0]["audio_throughput"]) > 0
    assert "mean_audio_ttfp_ms" in rows[0] and "p99_e2el_ms" in rows[0]


def test_one_result_filename_for_a_sweep_gives_a_file_per_run_or_appends(fake_engine, tmp_path):
    args = [
        "bench",
        "-c",
        "1,2",
        "-n",
        "2",
        "--save-result",
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "all.json",
    ]
    each = runner.invoke(app, args)
    assert each.exit_code == 0, each.output
    assert [json.loads(p.read_text())["max_concurrency"] for p in sorted(tmp_path.glob("all-*.json"))] == [1, 2]
    ok = runner.invoke(app, [*args, "--append-result"])
    assert ok.exit_code == 0, ok.output
    again = runner.invoke(app, [*args, "--append-result"])
    assert again.exit_code == 0
    assert [d["max_concurrency"] for d in read_results(tmp_path / "all.json")] == [1, 2, 1, 2]
