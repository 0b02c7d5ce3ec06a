"""`omni bench` through the CLI: usage errors (no engine) and one real run on omni-tiny."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

import omnicli.benchmark.entrypoint as bench_entry
from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from omnicli.engine.request import EngineError
from tests.fakes import SESSION_PROFILE, share_session_engine

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
DEMO_WAV = demo_manifest_path().parent / "prompts" / "heart_juice.wav"
REF_TEXT = "The birch canoe slid on the smooth planks."


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


@pytest.mark.parametrize("option", ["--result-dir", "--audio-out"])
def test_output_folder_naming_a_file_exits_2_before_the_engine(no_engine, tmp_path, option):
    (tmp_path / "taken").write_text("a file")
    result = runner.invoke(app, ["bench", option, str(tmp_path / "taken")])
    assert result.exit_code == 2, result.output
    assert f"{option} {tmp_path / 'taken'}: not a folder" in " ".join(result.output.split())


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
    missing = runner.invoke(app, ["bench", str(tmp_path / "nope.lst")])
    assert missing.exit_code == 2
    assert f"error: {tmp_path / 'nope.lst'}: manifest not found" in missing.output.splitlines(), missing.output
    bad_profile = runner.invoke(app, ["bench", "--profile", "no_such_profile_xyz"])
    assert bad_profile.exit_code == 2
    assert "profile error" in bad_profile.output and "no_such_profile_xyz" in bad_profile.output, bad_profile.output


def test_engine_start_failure_exits_3(monkeypatch, tmp_path):
    async def broken(resolved):
        raise EngineError("talker process exited during start-up")

    monkeypatch.setattr(bench_entry, "start_engine", broken)
    result = runner.invoke(app, ["bench", "-n", "2", "--result-dir", str(tmp_path)])
    assert result.exit_code == 3
    text = " ".join(result.output.split())  # undo terminal wrapping
    assert "'default' failed to start" in text and "talker process exited" in text
    (written,) = tmp_path.glob("omni-bench-*.json")  # nothing measured: the file says why (issue 31)
    doc = json.loads(written.read_text())
    assert doc["runs"] == [] and "talker process exited" in doc["engine_error"]


@pytest.mark.engine
def test_real_run_concurrency_1_and_8(tmp_path, engine_harness, monkeypatch):
    """omni-tiny, concurrency 1 then 8, one request per pass failing (text over the model's limit).
    In-process on the session's engine: the command's own start-up is tested by test_cli.py."""
    share_session_engine(monkeypatch, engine_harness)
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
            "--audio-out", str(tmp_path / "wavs"), "--plot", str(tmp_path / "sweep.png"), *SESSION_PROFILE,
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
        assert (
            run["total_output_tokens"] == 4 * 40 and run["total_input_tokens"] > 0
        )  # capped at 40 each; the failed one not counted
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


def test_engine_fault_in_a_later_pass_exits_3_and_keeps_the_completed_pass(monkeypatch, tmp_path):
    from tests.fakes import FakeEngine

    engines = []

    async def hangs_in_the_second_pass(resolved):
        engines.append(FakeEngine(hang_after=3, hang_s=0.05))  # -n 3: the c1 pass completes
        return engines[-1]

    monkeypatch.setattr(bench_entry, "start_engine", hangs_in_the_second_pass)
    result = runner.invoke(
        app, ["bench", "-c", "1,2", "-n", "3", "--result-dir", str(tmp_path), "--result-filename", "r.json"]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 3, text
    assert "engine failed: codec stage stopped" in text
    assert "default c2 was ended by the engine failure" in text
    assert len(engines[0].seen) <= 3 + 2  # the pass ended at the first failure, not after every prompt
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["default/c1"] and doc["runs"][0]["completed"] == 3
    assert "codec stage stopped" in doc["engine_error"] and doc["unfinished"] == "default c2"
    assert doc["interrupted"] is False and engines[0].closed


# -- Ctrl-C / SIGTERM: the real command in a subprocess, with a stand-in engine ----------------

STAND_IN_BENCH = """
import asyncio, subprocess, sys, time
import numpy as np
import omnicli.benchmark.entrypoint as bench_entry
from omnicli.cli import app
from omnicli.engine.request import AudioChunk, EngineDead, EngineStats, RequestInfo

mode, out = sys.argv[1], sys.argv[2]


class StandIn:
    # The engine's interface; its child process stands in for vLLM's engine core.
    sample_rate, model_name, device = 1000, "stand-in", "cpu"

    def __init__(self):
        self.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        self.announced = False

    async def generate(self, req):
        second = "-c2-" in req.request_id
        if second and not self.announced:
            self.announced = True
            print("second pass", self.child.pid, flush=True)
        try:
            for i in range(4):
                await asyncio.sleep(300 if second and mode == "hang" else 0.05)
                if self.fault():  # as vLLM's requests end when a terminal's Ctrl-C reaches its engine core
                    raise EngineDead(self.fault())
                info = RequestInfo(finish_reason="stop") if i == 3 else None
                yield AudioChunk(np.full(100, 0.1, np.float32), i == 3, time.perf_counter(), info)
        except (asyncio.CancelledError, GeneratorExit):
            print("cancelled", req.request_id, flush=True)
            raise

    def fault(self):
        return "the talker (vLLM engine core) aborted its requests" if self.child.poll() is not None else None

    def stats(self):
        return EngineStats()

    def write_run_files(self, run_dir):
        return []

    async def close(self):
        self.child.terminate()
        self.child.wait()
        print("engine closed", flush=True)


async def start(resolved):
    engine = StandIn()
    if mode == "starting":
        print("stand-in starting", engine.child.pid, flush=True)
        time.sleep(300)  # vLLM's start-up holds the main thread in native code
    return engine


bench_entry.start_engine = start
app(["bench", "-c", "1,2", "-n", "8", "--result-dir", out, "--result-filename", "r.json"], prog_name="omni")
"""


class StandInBench:
    """`omni bench -c 1,2` in a subprocess; its output (stdout and stderr) is read line by line.

    A context manager: whatever happens, the command and its stand-in engine process end with it.
    """

    def __init__(self, tmp_path: Path, mode: str):
        self.out = tmp_path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STAND_IN_BENCH, mode, str(tmp_path)],
            cwd=REPO,
            start_new_session=True,  # a shell job
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.engine_process: psutil.Process | None = None

    def __enter__(self) -> "StandInBench":
        return self

    def __exit__(self, *exc) -> None:
        for proc in (self.proc, self.engine_process):
            with contextlib.suppress(OSError, psutil.Error, AttributeError):
                proc.kill()

    def wait_for(self, prefix: str) -> str:
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"{prefix!r} never came:\n{''.join(self.lines)}")

    def wait_for_engine(self, prefix: str) -> psutil.Process:
        """Waits for the stand-in's `PREFIX PID` line; returns its engine process."""
        self.engine_process = psutil.Process(int(self.wait_for(prefix).split()[-1]))
        return self.engine_process

    def finish(self, timeout: float) -> tuple[int, float, str]:
        t0 = time.monotonic()
        rc = self.proc.wait(timeout)
        rest = self.proc.stdout.read()
        return rc, time.monotonic() - t0, " ".join(("".join(self.lines) + rest).split())

    def result(self) -> dict:
        return json.loads((self.out / "r.json").read_text())


def assert_gone(proc: psutil.Process) -> None:
    psutil.wait_procs([proc], timeout=5)
    assert not proc.is_running()


@pytest.mark.parametrize("to_group", [False, True], ids=["sigint", "terminal_ctrl_c"])
def test_first_ctrl_c_finishes_in_flight_requests_reports_completed_passes_and_exits_130(tmp_path, to_group):
    """A SIGINT to omni bench alone, and to its process group as a terminal sends it: then the
    stand-in engine process gets it too and its requests fail, which must not read as exit 3."""
    with StandInBench(tmp_path, "run") as bench:
        engine_process = bench.wait_for_engine("second pass")
        if to_group:
            os.killpg(bench.proc.pid, signal.SIGINT)
        else:
            bench.proc.send_signal(signal.SIGINT)
        rc, took, output = bench.finish(120)
        assert rc == 130, output
        assert took < 120  # not hanging; how fast is the machine's business
        if not to_group:  # the requests in flight finished within the grace period: none was cancelled
            assert "cancelled" not in output
        assert "SIGINT: stopping" in output and "engine closed" in output  # a graceful close
        assert "default c2 was interrupted and is not reported" in output
        assert "interrupted: the engine was closed; 1 completed pass(es) reported" in output
        assert_gone(engine_process)
        doc = bench.result()
        assert doc["interrupted"] is True and doc["unfinished"] == "default c2"
        assert [(r["label"], r["completed"]) for r in doc["runs"]] == [("default/c1", 8)]
        # Even when the terminal's Ctrl-C made the engine abort its requests: a stop the
        # user asked for is not an engine error (was: "... aborted its requests").
        assert doc["engine_error"] is None


def test_second_signal_forces_exit_ends_the_engine_process_and_keeps_completed_passes(tmp_path):
    with StandInBench(tmp_path, "hang") as bench:
        engine_process = bench.wait_for_engine("second pass")
        bench.proc.send_signal(signal.SIGINT)
        bench.wait_for("SIGINT")  # the first one only asked to stop; the requests hang
        assert bench.proc.poll() is None and engine_process.is_running()
        bench.proc.send_signal(signal.SIGTERM)
        rc, took, output = bench.finish(120)
        assert rc == 130, output
        assert took < 60 and "SIGTERM: forced exit; completed passes are kept" in output  # not the 300 s hang
        assert "engine closed" not in output
        assert_gone(engine_process)
        doc = bench.result()
        assert doc["interrupted"] is True and [r["label"] for r in doc["runs"]] == ["default/c1"]


def test_ctrl_c_during_engine_start_up_exits_at_once_leaving_no_engine_process(tmp_path):
    with StandInBench(tmp_path, "starting") as bench:
        engine_process = bench.wait_for_engine("stand-in starting")
        bench.proc.send_signal(signal.SIGINT)
        rc, took, output = bench.finish(120)
        assert rc == 130 and took < 60, output  # not the stand-in's 300 s start-up
        assert "forced exit" in output
        assert_gone(engine_process)
        doc = bench.result()  # nothing was measured, and the result file says so
        assert doc["interrupted"] is True and doc["runs"] == [] and doc["engine_error"] is None
