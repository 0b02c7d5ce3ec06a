"""`omni bench` through the CLI: usage errors (no engine) and one real run on omni-tiny."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import omnicli.commands.bench as bench_cmd
from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from omnicli.engine.request import EngineError

runner = CliRunner()
DEMO_WAV = demo_manifest_path().parent / "prompts" / "slt_birch.wav"
REF_TEXT = "The birch canoe slid on the smooth planks."


@pytest.fixture
def no_engine(monkeypatch):
    """Usage errors must be caught before any engine starts."""

    async def refuse(resolved):
        raise AssertionError("the engine must not start on a usage error")

    monkeypatch.setattr(bench_cmd, "_start_engine", refuse)


def write_manifest(folder: Path, texts: list[str]) -> Path:
    shutil.copy(DEMO_WAV, folder / "ref.wav")
    lines = [f"utt_{i}|{REF_TEXT}|ref.wav|{t}" for i, t in enumerate(texts)]
    path = folder / "meta.lst"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (["-c", "0"], "--concurrency"),
        (["-c", "2,x"], "--concurrency"),
        (["--metric-percentiles", "50,abc"], "--metric-percentiles"),
        (["--warmup", "2", "--warmup-pass"], "--warmup-pass"),
        (["--request-rate", "0"], "--request-rate"),
        (["--burstiness", "0"], "--burstiness"),
        (["--rounds", "0"], "--rounds"),
    ],
)
def test_bad_options_exit_2(no_engine, args, message):
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_bad_manifest_rows_are_listed_and_exit_2(no_engine, tmp_path):
    path = write_manifest(tmp_path, ["Fine text."])
    with open(path, "a") as f:
        f.write("utt_x|ref|missing.wav|text\n")
        f.write("only|two\n")
    result = runner.invoke(app, ["bench", str(path)])
    assert result.exit_code == 2
    assert f"{path}:2:" in result.output and "missing.wav" in result.output
    assert f"{path}:3:" in result.output


def test_unreadable_reference_exits_2(no_engine, tmp_path):
    (tmp_path / "ref.wav").write_bytes(b"not audio at all")
    path = tmp_path / "meta.lst"
    path.write_text(f"u0|{REF_TEXT}|ref.wav|Hello there.\n")
    result = runner.invoke(app, ["bench", "--manifest", str(path)])
    assert result.exit_code == 2
    assert f"{path}:1" in result.output and "reference audio" in result.output


def test_missing_manifest_and_bad_profile_exit_2(no_engine, tmp_path):
    assert runner.invoke(app, ["bench", str(tmp_path / "nope.lst")]).exit_code == 2
    assert runner.invoke(app, ["bench", "--profile", "no_such_profile_xyz"]).exit_code == 2


def test_engine_start_failure_exits_3(monkeypatch, tmp_path):
    async def broken(resolved):
        raise EngineError("talker process exited during start-up")

    monkeypatch.setattr(bench_cmd, "_start_engine", broken)
    result = runner.invoke(app, ["bench", "-n", "2", "--result-dir", str(tmp_path)])
    assert result.exit_code == 3
    text = " ".join(result.output.split())  # undo terminal wrapping
    assert "'default' failed to start" in text and "talker process exited" in text
    assert list(tmp_path.iterdir()) == []  # nothing measured, nothing written


@pytest.mark.engine
def test_real_run_concurrency_1_and_8(tmp_path):
    """omni-tiny, concurrency 1 then 8, one request per pass failing (text over the model's limit)."""
    texts = [
        "A large size in stockings is hard to sell.",
        "The boy was there when the sun rose.",
        "A rod is used to catch pink salmon.",
        "Smoky fires lack flame and heat.",
        "x" * 600,  # omni-tiny accepts 500 bytes: this one fails, and must be counted
    ]
    manifest = write_manifest(tmp_path, texts)
    out = tmp_path / "results"
    result = runner.invoke(
        app,
        [
            "bench", str(manifest), "-c", "1,8", "-n", "5", "--disable-shuffle", "--max-new-tokens", "40",
            "--warmup", "2", "--result-dir", str(out), "--result-filename", "r.json", "--save-detailed",
            "--audio-out", str(tmp_path / "wavs"), "--plot", str(tmp_path / "sweep.png"),
        ],
    )
    assert result.exit_code == 1, result.output  # some requests failed
    doc = json.loads((out / "r.json").read_text())
    runs = doc["runs"]
    assert [r["max_concurrency"] for r in runs] == [1, 8]
    for run in runs:
        assert run["model"] == "omni-tiny"
        assert (run["completed"], run["failed"], run["num_nonempty_audio"]) == (4, 1, 4)
        assert [f["utt"] for f in run["failures"]] == ["utt_4"] and "500" in run["failures"][0]["error"]
        assert run["num_hit_cap"] == 4  # 40 tokens is less than any of these texts needs
        assert 0 < run["mean_audio_ttfp_ms"] <= run["mean_e2el_ms"]
        assert run["audio_throughput"] > 0 and run["mean_audio_rtf"] > 0
        assert run["mean_audio_duration_s"] == pytest.approx(40 / 4 / 12.5)  # 10 frames at 12.5 frames/s
        assert run["codec_steps"] > 0 and run["talker_tokens"] >= 4 * 40
        assert len(run["utts"]) == 5 and run["errors"][4] and not any(run["errors"][:4])
        assert run["profile_digest"] and run["profile"]["model"] == "omni-tiny"
    # the same reference throughout: only the warmup encoded it (the over-long
    # text is rejected before its reference is looked at)
    assert [(r["num_ref_hot"], r["num_ref_cold"]) for r in runs] == [(4, 0), (4, 0)]
    assert runs[0]["warmup_requests"] == 2
    wavs = sorted(p.relative_to(tmp_path / "wavs").as_posix() for p in (tmp_path / "wavs").rglob("*.wav"))
    assert len(wavs) == 8 and wavs[0].endswith("_c1/utt_0.wav")
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert "Audio throughput" in result.output and "c=8" in result.output


def test_sigterm_and_ctrl_c_end_the_session_as_interrupted():
    import asyncio
    import os
    import signal
    import time

    class Session:
        closed = False

        async def run(self):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(5)
            finally:
                self.closed = True  # where the real session closes its engine

    s = Session()
    t0 = time.perf_counter()
    assert bench_cmd._run_session(s) == (True, None)
    assert s.closed and time.perf_counter() - t0 < 2

    class CtrlC:
        async def run(self):
            raise KeyboardInterrupt

    assert bench_cmd._run_session(CtrlC()) == (True, None)
