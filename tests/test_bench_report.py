"""Result JSON schema, A/B ratios, tables, plots and on-disk outputs of a pass."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
from rich.console import Console

from omnicli.benchmark.audio_out import RoundOutputs
from omnicli.benchmark.metrics import detailed_lists
from omnicli.benchmark.outputs.plot import plot_results
from omnicli.benchmark.outputs.table import comparison_tables, results_table
from omnicli.benchmark.report import build_document, build_run, compare_runs
from omnicli.benchmark.session import ProfileRun, RoundResult
from omnicli.driver import LoadShape
from omnicli.retention import Retainer
from tests.fakes import SR, bench_pass, bench_record

# The keys a run must carry (docs/metrics.md "Benchmark" + the additions).
REQUIRED = [
    "duration", "completed", "failed", "num_nonempty_audio", "request_throughput", "audio_throughput",
    "max_concurrency", "request_rate", "num_prompts", "profile", "profile_digest", "model", "device",
    "started_at", "omni_version", "machine",
    "num_ref_hot", "num_ref_cold",
    "talker_tokens_per_s", "codec_steps", "mean_codec_batch_size", "coalescing_waits", "coalescing_wait_ms",
    "codec_ring_headroom",
]
for stem in ("audio_ttfp_ms", "e2el_ms", "audio_rtf", "audio_duration_s", "audio_underrun_s"):
    REQUIRED += [f"{stat}_{stem}" for stat in ("mean", "median", "std", "p50", "p90", "p99")]
DETAILED = ["start_times", "audio_ttfps", "e2els", "audio_durations", "errors", "utts"]
MACHINE = ["device", "cpu_count", "torch_threads", "python", "torch", "vllm"]


@pytest.fixture(scope="module")
def profile():
    from omnicli.profile import load_profile

    return load_profile()


def test_run_has_every_required_key_and_is_strict_json(profile):
    run = build_run(bench_pass(profile)).to_dict()  # as the result file holds it
    missing = [k for k in REQUIRED if k not in run]
    assert not missing
    assert [k for k in MACHINE if k not in run["machine"]] == []
    assert "hostname" not in json.dumps(run["machine"]).lower()
    json.dumps(run, allow_nan=False)  # no NaN / Infinity in the file
    assert run["request_rate"] == "inf"
    assert run["profile"] == profile.to_dict() and run["profile_digest"] == profile.digest
    assert run["codec_ring_headroom"] is False
    assert run["mean_codec_batch_size"] == pytest.approx(2.5)
    assert run["talker_tokens_per_s"] == pytest.approx(200.0)
    assert (run["completed"], run["failed"], run["num_nonempty_audio"]) == (2, 1, 2)
    assert run["failures"] == [{"utt": "u2", "request_id": "id-u2", "round": 0, "error": "boom"}]
    assert (run["num_ref_hot"], run["num_ref_cold"]) == (1, 2)
    assert run["warmup_requests"] == 2
    # 3 s of audio from the completed requests over 1.1 s (0.0 -> u2 failing at 1.1)
    assert run["audio_throughput"] == pytest.approx(3.0 / 1.1)
    assert not any(k in run for k in DETAILED)


def test_ring_headroom_is_null_for_windowed_families(profile):
    from omnicli.families import family_names, get_family

    assert [n for n in family_names() if get_family(n).engine == "native" and get_family(n).ring_cache] == ["omni-tiny"]
    for model in ("orpheus", "neutts-air"):
        p = bench_pass(profile)
        p.model = model
        run = build_run(p)
        assert run.codec_ring_headroom is None
        json.dumps(run.to_dict(), allow_nan=False)


def test_detailed_lists_and_custom_percentiles(profile):
    obj = build_run(bench_pass(profile), percentiles=[50, 99.9], detailed=True)
    run = obj.to_dict()
    assert all(len(run[k]) == 3 for k in DETAILED)
    assert "p99.9_audio_ttfp_ms" in run and "p90_audio_ttfp_ms" not in run
    assert obj.percentiles == [50.0, 99.9] and obj.percentile(99.9, "audio_ttfp") == run["p99.9_audio_ttfp_ms"]
    assert run["errors"] == ["", "", "boom"]
    assert run["rounds"] == 1 and run["request_rounds"] == [0, 0, 0]  # the count is not overwritten by the lists
    build_document([obj], "t0")  # validates against the result file's model


def test_ab_ratios_are_b_over_a(profile):
    a = build_run(bench_pass(profile, "a"))
    b = build_run(bench_pass(profile, "b", speed=0.5))  # b delivers twice as fast
    (cmp,) = compare_runs([a, b])
    assert (cmp["a"], cmp["b"]) == ("a", "b")
    assert cmp["ratios"]["mean_audio_ttfp_ms"] == pytest.approx(0.5)
    assert cmp["ratios"]["mean_e2el_ms"] == pytest.approx(0.5)
    doc = build_document([a, b], "t0").to_dict()
    assert len(doc["comparisons"]) == 1 and len(doc["runs"]) == 2
    json.dumps(doc, allow_nan=False)
    assert build_document([a], "t0").comparisons == []


def test_sweep_comparison_pairs_by_load_shape(profile):
    runs = [build_run(bench_pass(profile, p, c)) for p in ("a", "b") for c in (1, 4)]
    cmps = compare_runs(runs)
    assert [(c["max_concurrency"], c["a"], c["b"]) for c in cmps] == [(1, "a", "b"), (4, "a", "b")]


def test_tables_render(profile):
    runs = [build_run(bench_pass(profile, "a", c)) for c in (1, 4)]
    console = Console(record=True, width=200)
    console.print(results_table(runs, [50, 90, 99]))
    text = console.export_text()
    assert "c=1" in text and "c=4" in text and "Audio throughput" in text and "P99 TTFP (ms)" in text
    ab = [build_run(bench_pass(profile, "a")), build_run(bench_pass(profile, "b", speed=0.5))]
    for table in comparison_tables(ab, [50, 90, 99]):
        console.print(table)
    text = console.export_text()
    assert "b/a" in text and "x0.50" in text


def test_plots_are_png(profile, tmp_path):
    sweep = [bench_pass(profile, "a", c) for c in (1, 4, 16)]
    runs = [build_run(r) for r in sweep]
    out = plot_results(runs, [detailed_lists(r.record_rounds) for r in sweep], tmp_path / "sweep.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    single = [bench_pass(profile)]
    out = plot_results([build_run(single[0])], [detailed_lists(single[0].record_rounds)], tmp_path / "one.png")
    assert out.stat().st_size > 1000


def test_round_outputs_write_audio_and_retain_failures(profile, tmp_path):
    pcm = np.full(1000, 0.2, np.float32)
    records = [
        bench_record("u0", 0.0, [0.1], [1000], pcm=pcm),
        bench_record("u0", 0.0, [0.1], [1000], pcm=pcm * 0.5),  # cycled prompt: the first one is kept
        bench_record("u1", 0.0, [0.1], [300], error="boom", pcm=pcm[:300]),
        bench_record("u2", 0.0, [0.1], [0], pcm=np.zeros(0, np.float32)),  # empty success
    ]
    out = RoundOutputs(tmp_path / "wavs", Retainer(tmp_path / "kept"), one_pass=True)
    run = ProfileRun("a", profile)
    out.handle(run, LoadShape(concurrency=1), 0, RoundResult(records), SimpleNamespace(sample_rate=SR))
    assert sorted(p.name for p in (tmp_path / "wavs").iterdir()) == ["u0.wav"]
    audio, sr = sf.read(tmp_path / "wavs" / "u0.wav")
    assert sr == SR and len(audio) == 1000 and audio[0] == pytest.approx(0.2, abs=1e-3)
    kept = sorted(p.suffix for p in (tmp_path / "kept").iterdir())
    assert kept == [".json", ".json", ".wav", ".wav"]  # the failed one and the empty one
    reasons = sorted(tuple(json.loads(p.read_text())["reasons"]) for p in (tmp_path / "kept").glob("*.json"))
    assert reasons == [("empty",), ("error",)]
    assert out.retained == 2 and out.wavs_written == 1


def test_round_outputs_one_folder_per_pass_when_several(profile, tmp_path):
    out = RoundOutputs(tmp_path, None, one_pass=False)
    assert out.pass_dir(ProfileRun("low/latency", profile), LoadShape(concurrency=8)) == tmp_path / "low_latency_c8"
    assert not RoundOutputs(None, None, one_pass=True).needs_pcm
