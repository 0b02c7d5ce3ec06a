"""`omni schema KIND` prints JSON Schemas that the files omni writes validate against."""

from __future__ import annotations

import json

import jsonschema
import pytest
from typer.testing import CliRunner

from omnicli.benchmark.report import build_document
from omnicli.cli import app
from omnicli.profile import load_profile
from omnicli.synth.plan import RESULTS, SUMMARY
from omnicli.synth.summary import write_summary
from tests.fakes import run_synth

runner = CliRunner()


def schema_of(kind: str) -> dict:
    result = runner.invoke(app, ["schema", kind])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_synth_results_rows_and_summary_validate(tmp_path):
    from omnicli.synth.summary import build_synth_summary

    m, out, run, _ = run_synth(tmp_path, ["one", "fail"], concurrency=2)
    write_summary(out, build_synth_summary(m, out, run, resolved=load_profile("cpu"), started_at="t0"))
    rows = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    row_schema, summary_schema = schema_of("results"), schema_of("summary")
    for row in rows:
        jsonschema.validate(row, row_schema)
    jsonschema.validate(json.loads((out / SUMMARY).read_text()), summary_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**rows[0], "status": "maybe"}, row_schema)


def test_bench_and_eval_schemas():
    jsonschema.validate(build_document([], "t0").to_dict(), schema_of("bench"))
    eval_schema = schema_of("eval")
    assert {"seed_wer_mean", "del", "num_scored"} <= set(eval_schema["properties"])
    assert {"metrics", "sim_mean", "sim_backend", "dnsmos_ovrl_mean", "utmos_mean", "num_low_mos"} <= set(
        eval_schema["properties"]
    )
    bench_run = schema_of("bench")["$defs"]["BenchRun"]
    assert "eval" in bench_run["properties"]


def test_eval_summary_requires_the_figures_of_each_metric_that_ran():
    from pydantic import ValidationError

    from omnicli.evaluation.summaries import EvalSummary

    facts = {
        "num_utts": 1, "num_missing": 0, "num_failed": 0, "missing": [], "failed": [], "keep_failed": None,
        "num_retained": 0, "retention_errors": 0, "manifest": None, "gen_dir": None, "profile": None,
        "profile_digest": None, "omni_version": "0", "started_at": "t0", "wall_s": 1.0,
    }
    sim = {"sim_mean": 0.9, "sim_median": 0.9, "sim_threshold": 0.75, "sim_backend": "dvector", "sim_note": "n",
           "num_sim_scored": 1, "num_sim_failed": 0, "sim_cpu_s_per_utt": 0.1, "num_low_sim": 0}
    EvalSummary.model_validate({"metrics": ["sim"], **facts, **sim})
    with pytest.raises(ValidationError, match="sim ran but the summary lacks sim_backend"):
        EvalSummary.model_validate(
            {"metrics": ["sim"], **facts, **{k: v for k, v in sim.items() if k != "sim_backend"}}
        )
    with pytest.raises(ValidationError, match="wer ran"):  # eval-wer's file (no `metrics`) must hold the WER figures
        EvalSummary.model_validate(facts)
    with pytest.raises(ValidationError):
        EvalSummary.model_validate({"metrics": ["sim"], **facts, **sim, "sim_mean": "high"})


def test_an_unknown_kind_is_a_usage_error():
    assert runner.invoke(app, ["schema", "nope"]).exit_code == 2
