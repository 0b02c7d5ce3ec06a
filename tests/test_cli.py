"""The README's main job through the real CLI (subprocess, own engine)."""

from __future__ import annotations

import json

import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli import __version__
from omnicli.cli import app
from tests.conftest import DEMO_MANIFEST, omni_cli

runner = CliRunner()


def test_help_lists_every_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("synth", "bench", "eval-wer", "profiles", "models"):
        assert command in result.output


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_models_list_names_the_default_model():
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0 and "omni-tiny" in result.output


def test_synth_missing_manifest_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["synth", str(tmp_path / "nope.lst"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "nope.lst" in result.output


@pytest.mark.engine
def test_synth_demo_end_to_end_then_resume_skips_everything(tmp_path):
    out = tmp_path / "out"
    args = [
        "synth",
        str(DEMO_MANIFEST),
        "--out",
        str(out),
        "--limit",
        "3",
        "--profile",
        "cpu",
        "--set",
        "talker.max_num_seqs=8",
    ]
    first = omni_cli(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["utt"] for r in rows) == ["demo_000", "demo_001", "demo_002"]
    for row in rows:
        assert row["status"] == "ok" and row["ttfp_s"] <= row["e2el_s"]
        info = sf.info(out / row["wav"])
        assert info.samplerate == 24000 and info.channels == 1
        assert abs(info.frames / 24000 - row["audio_seconds"]) < 1e-3
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["num_rows"], summary["num_ok"], summary["num_failed"]) == (3, 3, 0)
    assert summary["profile_digest"] and summary["profile"]["talker"]["max_num_seqs"] == 8

    again = omni_cli(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 done" in " ".join(again.stderr.split())  # notes go to stderr; rich wraps long lines
    assert len((out / "results.jsonl").read_text().splitlines()) == 3  # nothing redone
