"""The bench report as an object and its output plug-ins: a run is a `BenchRun` (declared keys, the pNN_
statistics the only extras), the document is versioned and loads back (older files too), and each output
(table, text, json, csv, plot, vLLM files) renders a saved result as the run rendered it, through
`omni bench-export`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from omnicli.benchmark.outputs import OutputFormat, VllmFiles, report_passes
from omnicli.benchmark.outputs.csvfile import ID_COLUMNS, sweep_csv
from omnicli.benchmark.outputs.jsonfile import JsonFile, JsonOutput
from omnicli.benchmark.outputs.plot import PlotFile
from omnicli.benchmark.outputs.table import TableOutput
from omnicli.benchmark.outputs.text import TextOutput, text_lines
from omnicli.benchmark.outputs.vllm import VllmOutput
from omnicli.benchmark.report import build_document, build_run
from omnicli.benchmark.result_models import BenchDocument, BenchRun, ResultFileError
from omnicli.cli import app
from omnicli.commands.json_schema import Kind, document_schema
from tests.fakes import REPORT_PERCENTILES as PERCENTILES
from tests.fakes import bench_pass, bench_sweep, report_plan

runner = CliRunner()


@pytest.fixture(scope="module")
def profile():
    from omnicli.profile import load_profile

    return load_profile()


@pytest.fixture
def passes(profile):
    return bench_sweep(profile)


def test_a_run_declares_every_key_and_refuses_unknown_ones(profile):
    run = build_run(bench_pass(profile), percentiles=PERCENTILES)
    assert isinstance(run, BenchRun) and run.completed == 2 and run.failures[0].utt == "u2"
    declared = set(BenchRun.model_fields)
    stems = ("audio_ttfp_ms", "e2el_ms", "audio_rtf", "audio_duration_s", "audio_underrun_s", "ttft_ms", "tpot_ms",
             "itl_ms")
    assert set(run.model_extra or {}) == {f"{p}_{stem}" for p in ("p50", "p90", "p99.9") for stem in stems}
    assert {"mean_audio_ttfp_ms", "std_itl_ms", "num_tpot_samples", "talker_tokens_per_s", "utts"} <= declared
    assert run.percentile(99.9, "e2el") == run.figure("p99.9_e2el_ms") is not None
    assert run.percentiles == PERCENTILES
    fields = run.to_dict()
    keys = list(fields)  # the file's order: each distribution's pNN_ right after its std_
    assert keys.index("p99.9_audio_ttfp_ms") == keys.index("std_audio_ttfp_ms") + 3 < keys.index("num_e2el_samples")
    with pytest.raises(ValidationError, match="not a result key"):
        BenchRun.model_validate({**fields, "mean_audio_ttpf_ms": 1.0})  # a misspelt headline key
    with pytest.raises(ValidationError, match="a statistic is a number"):
        BenchRun.model_validate({**fields, "p95_e2el_ms": "fast"})


def test_the_document_is_versioned_and_its_schema_is_as_strict_as_the_model(profile, tmp_path):
    doc = build_document([build_run(bench_pass(profile), percentiles=PERCENTILES)], "t0", PERCENTILES)
    data = doc.to_dict()
    assert list(data)[0] == "schema_version" and data["schema_version"] == 1
    schema = document_schema(Kind.bench)
    jsonschema.validate(data, schema)
    bad = json.loads(json.dumps(data))
    bad["runs"][0]["median_latency"] = 1.0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    assert schema["properties"]["schema_version"]["const"] == 1


def test_a_saved_result_loads_back_and_an_older_file_without_schema_version_too(passes, tmp_path):
    plan = report_plan(tmp_path, console=OutputFormat.text)
    report_passes(passes, plan)
    saved = json.loads(plan.path.read_text())
    loaded = BenchDocument.load(plan.path)
    assert loaded.to_dict() == saved and len(loaded.comparisons) == 2
    older = {k: v for k, v in saved.items() if k != "schema_version"}
    (tmp_path / "old.json").write_text(json.dumps(older))
    again = BenchDocument.load(tmp_path / "old.json")
    assert again.schema_version == 1 and again.to_dict() == saved


def test_bench_export_re_renders_the_same_csv_and_text_as_the_run(passes, tmp_path, capsys):
    plan = report_plan(tmp_path, csv_path=tmp_path / "run.csv", console=OutputFormat.text)
    code = report_passes(passes, plan)
    assert code == 1  # u2 fails in every pass
    printed = capsys.readouterr().out
    args = ["bench-export", str(plan.path), "--csv", str(tmp_path / "again.csv"), "--format", "text"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "run.csv").read_bytes()
    assert result.stdout == printed  # (the file names go to stderr)
    rows = list(csv.reader(io.StringIO((tmp_path / "run.csv").read_text())))
    assert tuple(rows[0][:len(ID_COLUMNS)]) == ID_COLUMNS and "p99.9_audio_ttfp_ms" in rows[0] and len(rows) == 5
    assert [r[rows[0].index("max_concurrency")] for r in rows[1:]] == ["1", "4", "1", "4"]


def test_bench_export_as_json_and_as_tables(passes, tmp_path):
    plan = report_plan(tmp_path)
    report_passes(passes, plan)
    as_json = runner.invoke(app, ["bench-export", str(plan.path), "--format", "json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output) == json.loads(plan.path.read_text())
    tables = runner.invoke(app, ["bench-export", str(plan.path)])
    assert tables.exit_code == 0 and "A/B - c=4" in tables.output and "4 failed request(s)" in tables.output


@pytest.mark.parametrize(("content", "why"), [
    (None, "cannot read it"),
    ("{not json", "not JSON"),
    ('{"date": "20261201-000000", "completed": 1}', "not an omni bench result file (no `runs`"),
    ('{"runs": [{"label": "x"}], "comparisons": []}', "not an omni bench result file: "),
])
def test_an_unreadable_result_exits_2_naming_the_file_and_why(tmp_path, content, why):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(app, ["bench-export", str(path)])
    assert result.exit_code == 2
    assert str(path) in " ".join(result.output.split()) and why in " ".join(result.output.split())
    with pytest.raises(ResultFileError):
        BenchDocument.load(path)


def test_plot_of_a_sweep_and_of_one_shape_from_a_saved_file(profile, passes, tmp_path):
    pytest.importorskip("matplotlib")
    plan = report_plan(tmp_path)
    report_passes(passes, plan)
    result = runner.invoke(app, ["bench-export", str(plan.path), "--plot", str(tmp_path / "sweep.png")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    one = build_document([build_run(bench_pass(profile), detailed=True)], "t0")
    PlotFile(tmp_path / "one.png").finalize(one)  # histograms from the file's --save-detailed lists
    assert (tmp_path / "one.png").stat().st_size > 1000
    (tmp_path / "bare.json").write_text(json.dumps(build_document([build_run(bench_pass(profile))], "t0").to_dict()))
    bare = runner.invoke(app, ["bench-export", str(tmp_path / "bare.json"), "--plot", str(tmp_path / "x.png")])
    assert bare.exit_code == 2 and "--save-detailed" in bare.output and not (tmp_path / "x.png").exists()


def test_plot_without_matplotlib_exits_2_with_the_pip_command(passes, tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else find_spec(name, *a))
    plan = report_plan(tmp_path)
    report_passes(passes, plan)
    result = runner.invoke(app, ["bench-export", str(plan.path), "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 2 and 'pip install "omnicli[plot]"' in " ".join(result.output.split())
    bench = runner.invoke(app, ["bench", "--plot", str(tmp_path / "p.png"), "-n", "1"])
    assert bench.exit_code == 2 and 'pip install "omnicli[plot]"' in " ".join(bench.output.split())


def test_the_outputs_are_chosen_from_the_options(tmp_path):
    kinds = [type(o) for o in report_plan(tmp_path, plot=tmp_path / "p.png", csv_path=tmp_path / "c.csv").outputs()]
    assert [k.__name__ for k in kinds] == ["TableOutput", "JsonFile", "CsvFile", "PlotFile"]
    vllm = VllmFiles(append=False, label=None, metadata={}, metrics=["e2el"])
    forced = report_plan(tmp_path, plot=tmp_path / "p.png", vllm=vllm, console=OutputFormat.json).outputs(forced=True)
    assert [type(o) for o in forced] == [JsonOutput, JsonFile, VllmOutput]  # no plot on a forced exit
    assert isinstance(report_plan(tmp_path, text=True).outputs()[0], TextOutput)
    assert isinstance(report_plan(tmp_path).outputs()[0], TableOutput)


def test_vllm_files_need_the_passes_and_match_their_runs(passes, tmp_path):
    vllm = VllmFiles(append=False, label="L", metadata={"tp": "1"}, metrics=["e2el", "audio_ttfp"])
    plan = report_plan(tmp_path, vllm=vllm)
    report_passes(passes, plan)
    files = sorted((tmp_path / "results").glob("L-*.json"))
    assert len(files) == 4
    doc = json.loads(files[0].read_text())
    summary = BenchDocument.load(plan.path)
    run = next(r for r in summary.runs if r.profile_label == doc["profile_label"]
               and r.max_concurrency == doc["max_concurrency"])
    assert doc["p99.9_e2el_ms"] == run.percentile(99.9, "e2el") and doc["tp"] == "1" and "mean_ttft_ms" not in doc
    with pytest.raises(ValueError, match="need the measured passes"):
        VllmOutput(vllm, tmp_path, plan.date, PERCENTILES, False).finalize(summary)


def test_an_interrupted_invocation_without_passes_writes_the_versioned_empty_file(tmp_path):
    plan = report_plan(tmp_path)
    assert report_passes([], plan, interrupted=True, unfinished="a/c1") == 0
    data = json.loads(plan.path.read_text())
    assert (data["schema_version"], data["runs"], data["unfinished"], data["interrupted"]) == (1, [], "a/c1", True)
    JsonFile(tmp_path / "again.json").finalize(BenchDocument.load(plan.path))
    assert json.loads((tmp_path / "again.json").read_text()) == data


def test_text_lines_and_csv_read_the_objects(profile):
    runs = [build_run(bench_pass(profile, "a", c)) for c in (1, 4)]
    lines = text_lines(runs, (50, 99))
    assert lines[0] == "== a c=1 ==" and "Completed / failed: 2 / 1" in lines
    header, first, _ = sweep_csv(runs, (50, 99)).splitlines()
    values = dict(zip(header.split(","), first.split(",")))
    assert values["profile_label"] == "a" and values["request_rate"] == "inf" and values["failed"] == "1"
    assert float(values["p99_audio_ttfp_ms"]) == runs[0].percentile(99, "audio_ttfp")


def test_omni_report_reads_new_and_older_bench_files(passes, tmp_path):
    from omnicli.report.sources import read_sources

    plan = report_plan(tmp_path)
    report_passes(passes, plan)
    older = tmp_path / "older"
    older.mkdir()
    saved = json.loads(plan.path.read_text())
    (older / "omni-bench-old.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "schema_version"}))
    for path in (plan.path, older / "omni-bench-old.json"):
        sources = read_sources([path])
        assert [len(b.runs) for b in sources.bench] == [4]
        assert sources.bench[0].runs[0]["mean_audio_ttfp_ms"] == saved["runs"][0]["mean_audio_ttfp_ms"]


def test_a_ray_engine_entry_holds_only_the_keys_of_a_run():
    from omnicli.benchmark.result_models import BenchEngineRun

    entry = {"engine": 0, "node": "n0", "engine_error": None, "completed": 3, "p99_e2el_ms": 12.0, "codec_steps": 4}
    assert BenchEngineRun.model_validate(entry).model_dump(exclude_unset=True) == entry
    with pytest.raises(ValidationError, match="not a key of a run"):
        BenchEngineRun.model_validate({**entry, "completd": 3})


def test_a_summary_main_wrote_loads_and_re_renders_to_the_csv_main_wrote_with_pandas(tmp_path):
    golden = Path(__file__).parent / "fixtures" / "golden" / "bench"  # written before schema_version and csv.writer
    result = runner.invoke(app, ["bench-export", str(golden / "summary.json"), "--csv", str(tmp_path / "r.csv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.csv").read_bytes() == (golden / "results.csv").read_bytes()
