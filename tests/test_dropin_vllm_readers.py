"""`omni bench --save-result` files fed to what vLLM's and vLLM-Omni's tools do with them
(tests/vllm_readers.py), and vLLM-Omni's command-line flags; a fake engine with talker
token timings (tests/fakes.py's TokenEngine) stands in for the real one (tests/test_dropin_ci_engine.py runs
the real one)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

import omnicli.benchmark.outputs.vllm as vllm_output
from omnicli.cli import app
from tests import vllm_readers
from tests.fakes import write_manifest

runner = CliRunner()
SR = 1000


def bench(*args):
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code in (0, 1), result.output
    return result


def test_a_sweep_with_result_filename_gets_one_vllm_file_per_run_that_the_sweep_reads(token_engine, tmp_path):
    # vLLM's sweep passes these to each benchmark it runs (finding 1: one object per file)
    m = write_manifest(tmp_path, ["one two", "three four five"])
    bench(
        str(m),
        "-c",
        "1,2",
        *vllm_readers.SWEEP_BENCH_ARGS,
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "run=0.json",
    )
    files = sorted(tmp_path.glob("run=0-*.json"))
    assert [f.name for f in files] == ["run=0-infqps-concurrency1.json", "run=0-infqps-concurrency2.json"]
    runs = [vllm_readers.sweep_reads_run(f, {"max_concurrency": c}, 0) for f, c in zip(files, (1, 2))]
    (tmp_path / "summary.json").write_text(json.dumps(runs))
    df = vllm_readers.sweep_plot_frame(tmp_path / "summary.json")  # the plot's default --var-y median_ttft_ms
    assert (df["median_ttft_ms"] > 0).all() and list(df["request_rate"]) == [math.inf, math.inf]
    # a template names each run
    bench(
        str(m),
        "-c",
        "1,2",
        "--save-result",
        "--result-dir",
        str(tmp_path / "t"),
        "--result-filename",
        "r-c{concurrency}-{rate}.json",
    )
    assert sorted(p.name for p in (tmp_path / "t").glob("r-*.json")) == ["r-c1-inf.json", "r-c2-inf.json"]


def test_append_result_writes_vllms_layout_and_says_when_json_load_cannot_read_it(token_engine, tmp_path):
    m = write_manifest(tmp_path, ["one two"])
    args = [str(m), "--append-result", "--result-dir", str(tmp_path), "--result-filename", "all.json"]
    first = bench(*args)
    assert "one per line" not in " ".join(first.output.split())
    assert json.loads((tmp_path / "all.json").read_text())["completed"] == 1  # one run: json.load reads it
    second = bench(*args)
    text = (tmp_path / "all.json").read_text()
    assert text.count("\n") == 1 and not text.endswith("\n")  # vLLM: "\n" before each appended object
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert "holds 2 results, one per line" in " ".join(second.output.split())


def test_vllm_latency_keys_are_the_talkers_and_the_ci_scripts_compare_two_runs(token_engine, tmp_path):
    m = write_manifest(tmp_path, ["one two", "three four five", "six"])
    out = tmp_path / "results"
    for name, c in (("serving_a", "1"), ("serving_b", "2")):
        bench(
            str(m),
            "-c",
            c,
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(out),
            "--result-filename",
            f"{name}.json",
            "--goodput",
            "ttft:1000",
            "e2el:1",
            "--metadata",
            "a=1",
            "b=2",
        )
        (out / f"{name}.commands").write_text(json.dumps({
            "server_command": "vllm serve fake/tiny --tensor-parallel-size 1",
            "client_command": f"vllm bench serve --request-rate inf --max-concurrency {c}", "gpu_type": "cpu"}))
    doc = json.loads((out / "serving_a.json").read_text())
    assert doc["a"] == "1" and doc["b"] == "2"  # several --metadata pairs after one flag
    for stem in ("ttft", "tpot", "itl"):
        for stat in ("mean", "median", "std", "p99"):
            assert doc[f"{stat}_{stem}_ms"] > 0 or stat == "std"
    assert doc["num_ttft_samples"] == 3 and doc["num_tpot_samples"] == 3 and doc["num_itl_samples"] == 15
    # the fake's talker: first output after 4 ms, then one every 2 ms (loaded machine: bounds, not equalities)
    assert 3.5 <= doc["median_ttft_ms"] < 500 and 1.5 <= doc["median_itl_ms"] < 500
    assert doc["mean_tpot_ms"] == pytest.approx(np.mean([sum(i) / 5 for i in doc["itls"]]) * 1000)
    assert doc["request_goodput"] == 0.0  # e2el <= 1 ms: no request meets both SLOs
    assert (doc["max_output_tokens_per_s"], doc["max_concurrent_requests"]) == vllm_peaks(doc) and doc["rtfx"] == 0.0
    assert doc["total_audio_frames"] == 3 * 3 * 50 and len(doc["latencies"]) == len(doc["queue_times"]) == 3
    assert doc["output_lens"] == [6, 6, 6] and sorted(doc["input_lens"]) == [
        3,
        7,
        15,
    ]  # the fake: one prompt token a character
    assert [len(i) for i in doc["itls"]] == [5, 5, 5] and sorted(doc["ttfts"])[1] * 1000 == pytest.approx(
        doc["median_ttft_ms"]
    )
    # finding 4: no text-token counts under vLLM's names; the talker's under omni's, and the file says so
    assert (doc["total_input_tokens"], doc["total_output_tokens"], doc["output_throughput"]) == (0, 0, 0.0)
    assert (
        doc["talker_output_tokens"] == 18 and doc["talker_prompt_tokens"] > 0 and "talker" in doc["key_notes"]["ttft"]
    )
    rows = vllm_readers.convert_results_to_json(out)
    assert [r["Test name"] for r in rows] == ["serving_a", "serving_b"] and rows[0]["GPU"] == "1xcpu"
    (tmp_path / "a.json").write_text(json.dumps([rows[0]]))
    (tmp_path / "b.json").write_text(
        json.dumps([{**rows[1], "# of max concurrency.": rows[0]["# of max concurrency."]}])
    )
    tables = vllm_readers.compare_json_results([tmp_path / "a.json", tmp_path / "b.json"])  # finding 2: no KeyError
    p99 = tables["P99 TTFT (ms)"]
    assert p99["Ratio 1 vs 2"].iloc[0] == pytest.approx(rows[0]["P99 TTFT (ms)"] / rows[1]["P99 TTFT (ms)"])
    assert math.isnan(
        tables["Output Tput (tok/s)"]["Ratio 1 vs 2"].iloc[0]
    )  # 0 output tokens: no ratio, as for a base of 0


def vllm_peaks(doc):
    """vLLM's calculate_metrics peaks from a file's lists: token times start + ttft + cumulated itls,
    one-second buckets from the first start, requests active in each bucket."""
    starts, ends = doc["start_times"], [s + e for s, e in zip(doc["start_times"], doc["latencies"])]
    t0 = min(starts)
    buckets = int(np.ceil(max(ends) - t0)) + 1
    tokens, active = np.zeros(buckets), np.zeros(buckets)
    for start, ttft, itl, end in zip(starts, doc["ttfts"], doc["itls"], ends):
        for t in np.cumsum([start + ttft, *itl]):
            tokens[int(t - t0)] += 1
        for second in range(int(start - t0), int(end - t0) + 1):
            active[second] += 1
    return float(tokens.max()), int(active.max())


def test_statistics_without_samples_are_zero_as_vllm_writes_them(token_engine, tmp_path):
    # finding 3: every request failed or had no audio: bench_tts's table and the CI's comparisons still read it
    m = write_manifest(tmp_path, ["fail", "empty"])
    bench(str(m), "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["mean_audio_ttfp_ms"] == 0.0 and doc["p99_audio_rtf"] == 0.0 and doc["num_audio_ttfp_samples"] == 0
    assert doc["num_ttft_samples"] == 1  # the empty one ran in the engine: it got talker tokens
    assert doc["completed"] == 0 and doc["failed"] == 2  # issue 32 item 4: no audio is a failure, as vLLM-Omni's
    assert "0.000" in vllm_readers.bench_tts_row(tmp_path / "r.json", "voice_clone", 1)
    assert vllm_readers.plot_results_values([tmp_path / "r.json"])["mean_audio_rtf"] == [0.0]
    params = {"baseline": {"cpu": {"median_audio_ttfp_ms": [100.0], "audio_throughput": [0.0]}}}
    for num_prompt in (2, 1):
        with pytest.raises(AssertionError, match="Request failures exist"):
            vllm_readers.omni_ci_check(tmp_path / "r.json", params, num_prompt=num_prompt, hardware="cpu",
                                       sweep_index=0)


def test_rounds_keep_num_prompts_equal_to_completed(token_engine, tmp_path):
    import jsonschema

    m = write_manifest(tmp_path, ["one two", "three"])
    bench(str(m), "--rounds", "3", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, json.loads(runner.invoke(app, ["schema", "bench-run"]).output))  # `omni schema bench-run`
    assert doc["num_prompts"] == doc["completed"] == 6 and doc["prompts_per_round"] == 2 and doc["rounds"] == 3
    params = {"baseline": {"cpu": {"mean_audio_rtf": [1e9], "audio_throughput": [1e-9]}}}
    vllm_readers.omni_ci_check(tmp_path / "r.json", params, num_prompt=6, hardware="cpu", sweep_index=0)
    with pytest.raises(AssertionError, match="audio_throughput"):  # the check can fail
        vllm_readers.omni_ci_check(tmp_path / "r.json", {"baseline": {"cpu": {"audio_throughput": [1e9]}}},
                                   num_prompt=6, hardware="cpu", sweep_index=0)


def test_vllm_omni_dataset_request_and_sampling_flags_map_onto_omni(token_engine, tmp_path):
    data = tmp_path / "seedtts"
    (data / "en").mkdir(parents=True)
    sf.write(data / "en" / "ref.wav", np.zeros(800, np.float32), 16000)
    (data / "en" / "meta.lst").write_text("u0|ref|ref.wav|hello there\n")
    (data / "zh").mkdir()
    (data / "zh" / "meta.lst").write_text("z0|x|y.wav|ni hao\n")
    result = bench(
        "--dataset-name",
        "seed-tts",
        "--dataset-path",
        str(data),
        "--seed-tts-locale",
        "en",
        "--backend",
        "openai-audio-speech",
        "--endpoint",
        "/v1/audio/speech",
        "--host",
        "h",
        "--port",
        "1",
        "--model",
        "Qwen/x",
        "--trust-remote-code",
        "--extra-body",
        '{"voice": "Vivian", "max_new_tokens": 33, "temperature": 0.5, "task_type": "Base", "seed": 7}',
        "--top-k",
        "5",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(tmp_path),
        "--result-filename",
        "r.json",
    )
    text = " ".join(result.output.split())
    assert "--backend, --endpoint, --host, --port, --model: vLLM server option(s), not applying" in text
    assert "--trust-remote-code: accepted and never honoured" in text  # issue 32 item 1: said so
    assert "task_type not used" in text
    req = token_engine.requests[-1]
    assert (req.text, req.voice, req.max_new_tokens, req.seed) == ("hello there", "Vivian", 33, 7)
    profile = json.loads((tmp_path / "r.json").read_text())["profile_digest"]
    summary = json.loads(next(tmp_path.glob("omni-bench-*.json")).read_text())["runs"][0]
    assert summary["profile_digest"] == profile
    assert summary["profile"]["talker"]["temperature"] == 0.5 and summary["profile"]["talker"]["top_k"] == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset-name", "seed-tts"], "needs --dataset-path"),
        (["--dataset-path", "org/hub-dataset"], "no such local folder"),
        (["--dataset-name", "random"], "seed-tts dataset"),
        (["--extra-body", "[1]"], "JSON object"),
        (["--extra-body", '{"max_tokens": 5}', "--max-new-tokens", "6"], "different token caps"),
        (["--goodput", "ttft"], "KEY:VALUE"),
        (["--percentile-metrics", "ttft,bogus"], "'bogus'"),
        (["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"], "start and end rates"),
        (
            ["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "2", "-r", "3"],
            "leave --request-rate out",
        ),
        (["--plot-timeline", "--timeline-itl-thresholds", "5"], "two thresholds"),
        (["--save-result", "--result-filename", "r-{conc}.json"], "{conc}"),
    ],
)
def test_bad_vllm_flags_exit_2_before_the_engine(token_engine, args, message):
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert token_engine.requests == []


def test_ramp_up_follows_vllms_rates_and_names_the_file(token_engine, tmp_path):
    from omnicli.driver.load import LoadShape

    shape = LoadShape(ramp_up="linear", ramp_start=1.0, ramp_end=1000.0, seed=3)
    gaps = np.diff(shape.offsets(200))
    assert gaps[:20].mean() > 10 * gaps[-20:].mean()  # the rate rises from 1 to 1000 requests/s
    m = write_manifest(tmp_path, ["a", "b", "c"])
    bench(
        str(m),
        "--ramp-up-strategy",
        "exponential",
        "--ramp-up-start-rps",
        "50",
        "--ramp-up-end-rps",
        "200",
        "--save-result",
        "--result-dir",
        str(tmp_path),
        "--label",
        "L",
    )
    name, = [p.name for p in tmp_path.glob("L-*.json")]
    assert name.startswith("L-ramp-up-exponential-50.0qps-200.0qps-tiny-")
    doc = json.loads((tmp_path / name).read_text())
    assert (doc["ramp_up_strategy"], doc["max_concurrency"], doc["completed"]) == ("exponential", None, 3)


def test_timeline_data_is_what_vllms_timeline_plot_takes(token_engine, tmp_path, monkeypatch):
    calls = []
    import vllm.benchmarks.plot as vplot  # vLLM's own: the project runs on vLLM

    monkeypatch.setattr(
        vplot, "generate_timeline_plot", lambda data, path, itl_thresholds: calls.append((data, path, itl_thresholds))
    )
    monkeypatch.setattr(vllm_output, "timeline_missing", lambda: None)  # plotly is optional: the drawing is stubbed
    m = write_manifest(tmp_path, ["a b", "c"])
    bench(str(m), "--plot-timeline", "--result-dir", str(tmp_path), "--result-filename", "r.json")
    (data, path, thresholds), = calls
    assert path == tmp_path / "r.timeline.html" and thresholds == [0.025, 0.05]
    segments = vplot.construct_timeline_data(data, thresholds, ["lo", "mid", "hi"])  # vLLM's own segmenting
    assert sum(s["type"] == "TTFT" for s in segments) == 2 and len(segments) == 2 * 6
    assert not (tmp_path / "r.json").exists()  # --plot-timeline alone writes no result file, as vLLM


def test_plot_timeline_without_plotly_exits_2_before_the_engine(token_engine, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else find_spec(name, *a))
    result = runner.invoke(app, ["bench", "--plot-timeline"])
    assert result.exit_code == 2 and "pip install plotly" in " ".join(result.output.split())
    assert token_engine.requests == []


def test_eval_wer_figures_reach_vllm_omnis_quality_keys(tmp_path):
    from omnicli.benchmark.vllm_format import vllm_result

    run = {"model": "m", "num_prompts": 2, "request_rate": "inf", "duration": 1.0, "completed": 2, "failed": 0,
           "eval": {"metrics": ["wer"], "seed_wer_mean": 12.5, "num_scored": 2}}
    (tmp_path / "r.json").write_text(json.dumps(vllm_result(run, date="d")))
    assert vllm_readers.plot_results_values([tmp_path / "r.json"])["seed_tts_content_error_mean"] == [0.125]
    assert "seed_tts_content_error_mean" not in vllm_result({**run, "eval": {"metrics": ["sim"]}}, date="d")


def test_multi_value_flags_are_spread_as_argparse_reads_them():
    from omnicli.commands.bench_vllm import spread_multi_values

    flags = {"--metadata": "=", "--goodput": ":"}
    assert spread_multi_values(
        ["--metadata", "a=1", "b=2", "m.lst", "--goodput", "ttft:5", "e2el:9", "-c", "1"], flags
    ) == ["--metadata", "a=1", "--metadata", "b=2", "m.lst", "--goodput", "ttft:5", "--goodput", "e2el:9", "-c", "1"]
    assert spread_multi_values(["--metadata=a=1", "b=2", "--label", "x=y"], flags) == [
        "--metadata=a=1",
        "--metadata",
        "b=2",
        "--label",
        "x=y",
    ]
