"""`omni bench --eval`: checked before any engine starts; scores the pass's own audio into the result file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from tests.fakes import SESSION_PROFILE, share_session_engine

runner = CliRunner()
DEMO_WAV = demo_manifest_path().parent / "prompts" / "heart_juice.wav"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--eval", "sim"], "--audio-out"),
        (["--eval", "sim,bogus", "--audio-out", "OUT"], "bogus"),
        (["--eval-asr", "faster-whisper:tiny.en-bundled"], "--eval"),
        (["--eval", "wer", "--eval-asr", "openai-whisper:/no/such/model.pt", "--audio-out", "OUT"], "not found"),
    ],
)
def test_bad_eval_options_exit_2_before_the_engine(no_engine, tmp_path, args, message):
    args = [str(tmp_path / "o") if a == "OUT" else a for a in args]
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


@pytest.mark.engine
def test_bench_eval_adds_sim_and_mos_of_its_own_audio(tmp_path, engine_harness, monkeypatch):
    pytest.importorskip("resemblyzer")
    pytest.importorskip("speechmos")
    share_session_engine(monkeypatch, engine_harness)  # in-process on the session's engine: no start-up to pay
    shutil.copy(DEMO_WAV, tmp_path / "ref.wav")
    texts = ["A large size in stockings is hard to sell.", "The boy was there when the sun rose."]
    (tmp_path / "meta.lst").write_text("".join(f"u{i}|The birch canoe.|ref.wav|{t}\n" for i, t in enumerate(texts)))
    out, wavs = tmp_path / "results", tmp_path / "wavs"
    result = runner.invoke(app, [
        "bench", str(tmp_path / "meta.lst"), "-n", "2", "--disable-shuffle", "--max-new-tokens", "40",
        "--result-dir", str(out), "--result-filename", "r.json", "--audio-out", str(wavs), "--eval", "sim,mos",
        *SESSION_PROFILE,
    ])
    assert result.exit_code == 0, result.output
    (run,) = json.loads((out / "r.json").read_text())["runs"]
    figures = run["eval"]
    assert figures["metrics"] == ["sim", "mos"] and figures["sim_backend"] == "dvector"
    assert figures["num_mos_scored"] == 2 and 1 <= figures["dnsmos_ovrl_mean"] <= 5
    assert figures["mos_cpu_s_per_utt"] > 0 and "NOT comparable" in figures["sim_note"]
    # omni-tiny's random-weight audio is not speech: the d-vector's voice-activity trim may
    # leave nothing, which must show as a SIM failure, never as a number.
    assert figures["num_sim_scored"] + figures["num_sim_failed"] == 2
    rows = [json.loads(line) for line in (wavs / "eval" / "eval_results.jsonl").read_text().splitlines()]
    for row in rows:
        assert (row["sim"] is None) == ("voiced" in (row["sim_error"] or "")), row
        assert row["sim"] is None or -1 <= row["sim"] <= 1
    summary = json.loads(Path(figures["summary_file"]).read_text())
    assert summary["sim_mean"] == figures["sim_mean"] and Path(figures["summary_file"]).parent == wavs / "eval"
    assert len((wavs / "eval" / "eval_results.jsonl").read_text().splitlines()) == 2
