"""The real `omni synth` process under kill -9, Ctrl-C and a failing engine start-up.

Each CLI run pays a full engine start-up, so the runs are started
together (one module fixture) and each test waits for its own. Every run
carries a marker in its environment, which its children inherit: that is
how "no process left behind" is checked, whatever the process tree became.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import soundfile as sf

from omnicli.atomic import read_jsonl
from omnicli.manifest import read_manifest
from omnicli.synth.plan import RESULTS, plan_run
from omnicli.synth.run import SynthRun
from tests.conftest import DEMO_MANIFEST, TEST_PROFILE_SETS, mount_tmpfs, unmount
from tests.processes import wait_gone

pytestmark = pytest.mark.engine

ROWS = 8
START_TIMEOUT_S = 900  # a bound, not a wait: five engines starting at once on a 2-core machine took >300 s at load ~40


class CliRun:
    def __init__(self, folder: Path, *extra: str, out: Path | None = None):
        self.folder = folder
        self.out = out or folder / "out"
        self.manifest = folder / "meta.lst"
        self.marker = uuid.uuid4().hex
        self.log = folder / "cli.log"
        sets = [arg for s in TEST_PROFILE_SETS for arg in ("--set", s)]
        cmd = [
            sys.executable,
            "-m",
            "omnicli",
            "synth",
            str(self.manifest),
            "--out",
            str(self.out),
            "--profile",
            "cpu",
            *sets,
            "-c",
            "2",
            *extra,
        ]
        with open(self.log, "w") as log:
            # Own process group, like a shell job: a Ctrl-C reaches the whole group.
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "OMNI_TEST_MARK": self.marker},
            )

    def wait_for_rows(self, n: int) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            if len(read_jsonl(self.out / RESULTS)) >= n:
                return True
            time.sleep(0.2)
        return False

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def make_set(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copytree(DEMO_MANIFEST.parent / "prompts", folder / "prompts")
    prompts = sorted(p.name for p in (folder / "prompts").glob("*.wav"))
    lines = [f"r{i}|Reference words.|prompts/{prompts[i % len(prompts)]}|Short line {i}." for i in range(ROWS)]
    (folder / "meta.lst").write_text("\n".join(lines) + "\n")
    return folder


def kill9_scenario(run: CliRun) -> dict:
    reached = run.wait_for_rows(1)
    run.proc.kill()
    run.proc.wait()
    t0 = time.monotonic()
    left = wait_gone(run.marker, 30)
    return {"reached": reached, "left": left, "cleanup_s": time.monotonic() - t0}


def sigint_scenario(run: CliRun) -> dict:
    reached = run.wait_for_rows(1)
    t0 = time.monotonic()
    os.killpg(run.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    try:
        rc = run.proc.wait(90)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        rc = None
    exit_s = time.monotonic() - t0
    return {"reached": reached, "rc": rc, "exit_s": exit_s, "left": wait_gone(run.marker, 15)}


def sighup_scenario(run: CliRun) -> dict:
    reached = run.wait_for_rows(1)
    os.killpg(run.proc.pid, signal.SIGHUP)  # what a shell does to its jobs when the ssh session closes
    try:
        rc = run.proc.wait(90)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        rc = None
    return {"reached": reached, "rc": rc, "left": wait_gone(run.marker, 15)}


def runs_to_its_end(run: CliRun) -> dict:
    """The disk-full and start-failure runs: the command ends by itself."""
    try:
        rc = run.proc.wait(START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        rc = None
    return {"rc": rc, "left": wait_gone(run.marker, 15)}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory) -> dict[str, tuple[CliRun, Future]]:
    base = tmp_path_factory.mktemp("cli")
    small = base / "small"  # a real 300 KiB filesystem: room for about 4 of the 8 wavs
    disk_full_skip = mount_tmpfs(small, "300k")
    runs = {
        "kill9": CliRun(make_set(base / "kill9")),
        "sigint": CliRun(make_set(base / "sigint")),
        "sighup": CliRun(make_set(base / "sighup")),
        # Too small a KV cache for max_model_len: vLLM's engine core fails after it has started.
        "startfail": CliRun(make_set(base / "startfail"), "--set", "talker.kv_cache_space_gb=0.001"),
    }
    if disk_full_skip is None:
        runs["diskfull"] = CliRun(make_set(base / "diskfull"), out=small / "out")
    scenarios = {"kill9": kill9_scenario, "sigint": sigint_scenario, "sighup": sighup_scenario,
                 "startfail": runs_to_its_end, "diskfull": runs_to_its_end}
    pool = ThreadPoolExecutor(max_workers=len(runs))
    futures = {name: pool.submit(scenarios[name], run) for name, run in runs.items()}
    yield {name: (runs[name], futures[name]) for name in runs} | (
        {} if disk_full_skip is None else {"diskfull": disk_full_skip}
    )
    pool.shutdown(wait=True)
    for run in runs.values():
        if run.proc.poll() is None:
            run.proc.kill()
    if disk_full_skip is None:
        unmount(small)


def test_kill9_leaves_no_processes_no_torn_files_and_resume_completes_exactly_the_rest(cli_runs, engine_harness):
    run, future = cli_runs["kill9"]
    seen = future.result(timeout=START_TIMEOUT_S + 60)
    assert seen["reached"], run.output()[-3000:]
    assert not seen["left"], f"processes outlived the killed parent: {seen['left']}"  # the orphan guard

    finished = {r["utt"]: r for r in read_jsonl(run.out / RESULTS)}
    assert finished and all(r["status"] == "ok" for r in finished.values())
    for utt, row in finished.items():  # every wav a finished row names is whole
        assert sf.info(run.out / f"{utt}.wav").frames == round(row["audio_seconds"] * 24000)
    for wav in run.out.glob("*.wav"):  # and no wav exists without being whole
        sf.info(wav)

    manifest = read_manifest(run.manifest)
    plan = plan_run(manifest, run.out)
    assert sorted(plan.done) == sorted(finished)
    missing = [r.utt for r in plan.todo]
    assert sorted(missing) == sorted({r.utt for r in manifest.rows} - set(finished))
    resume = SynthRun(engine_harness.engine, run.out, concurrency=4)
    engine_harness.run(resume.run(plan.todo))
    assert sorted(r.utt for r in resume.results) == sorted(missing)  # exactly the missing ones
    rows = read_jsonl(run.out / RESULTS)
    assert sorted(r["utt"] for r in rows) == sorted(r.utt for r in manifest.rows)  # one row each, no duplicates
    assert all(r["status"] == "ok" for r in rows)
    assert not list(run.out.glob(".*.tmp"))
    assert plan_run(manifest, run.out).todo == []


def test_ctrl_c_stops_writes_a_valid_summary_and_leaves_no_processes(cli_runs):
    run, future = cli_runs["sigint"]
    seen = future.result(timeout=START_TIMEOUT_S + 120)
    assert seen["reached"], run.output()[-3000:]
    assert seen["rc"] == 130, run.output()[-3000:]
    assert seen["exit_s"] < 60
    assert not seen["left"], f"processes left after Ctrl-C: {seen['left']}"
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["engine_error"] is None  # vLLM aborting on the terminal's Ctrl-C is not an engine error
    assert summary["num_ok"] >= 1 and summary["num_failed"] == 0  # the interruption is not a failure
    assert summary["num_ok"] + summary["num_pending"] == ROWS
    rows = read_jsonl(run.out / RESULTS)
    assert len(rows) == summary["num_ok"] and all(r["status"] == "ok" for r in rows)
    assert not list(run.out.glob(".*.tmp"))
    assert "interrupted" in run.output()


def test_engine_start_failure_exits_3_with_a_clear_message_and_no_processes(cli_runs):
    run, future = cli_runs["startfail"]
    seen = future.result(timeout=START_TIMEOUT_S + 60)
    output = run.output()
    assert seen["rc"] == 3, output[-3000:]
    assert "engine error" in output and "failed to start" in output
    assert "KV cache" in output  # vLLM's root cause is shown, not only "initialization failed"
    assert not seen["left"], f"processes left after a failed start: {seen['left']}"
    summary = json.loads((run.out / "summary.json").read_text())
    assert "failed to start" in summary["engine_error"] and summary["num_pending"] == ROWS


def test_sighup_is_a_stop_like_sigterm(cli_runs):
    # Was: exit 129, no message, no summary, requests in flight dropped.
    run, future = cli_runs["sighup"]
    seen = future.result(timeout=START_TIMEOUT_S + 120)
    output = run.output()
    assert seen["reached"], output[-3000:]
    assert seen["rc"] == 130, output[-3000:]
    assert "SIGHUP" in output and "interrupted" in output
    assert not seen["left"], f"processes left after SIGHUP: {seen['left']}"
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["engine_error"] is None
    assert summary["num_ok"] >= 1 and summary["num_failed"] == 0
    assert summary["num_ok"] + summary["num_pending"] == ROWS


def test_disk_full_stops_with_exit_4_leaves_rows_pending_and_a_rerun_finishes(cli_runs, engine_harness):
    # Was: the run kept synthesizing, recorded the rest as failed, exit 1; a re-run said "0 to do".
    if isinstance(cli_runs["diskfull"], str):
        pytest.skip(cli_runs["diskfull"])
    run, future = cli_runs["diskfull"]
    seen = future.result(timeout=START_TIMEOUT_S + 60)
    output = " ".join(run.output().split())
    assert seen["rc"] == 4, output[-3000:]
    assert f"error: cannot write {run.out}/" in output and "No space left on device" in output
    assert "left pending (not failed); free space or fix the folder, then run the same command again" in output
    assert not seen["left"], f"processes left after the disk-full stop: {seen['left']}"
    rows = read_jsonl(run.out / RESULTS)
    assert rows and all(r["status"] == "ok" for r in rows)  # no utterance blamed for the disk
    manifest = read_manifest(run.manifest)
    plan = plan_run(manifest, run.out)
    assert plan.failed_before == [] and len(plan.todo) == ROWS - len(rows)
    if (run.out / "summary.json").exists():  # written when there was room, else removed rather than stale
        summary = json.loads((run.out / "summary.json").read_text())
        assert (
            summary["num_failed"] == 0
            and summary["num_pending"] == ROWS - len(rows)
            and "No space" in summary["output_error"]
        )

    subprocess.run(["mount", "-o", "remount,size=16m", str(run.out.parent)], check=True)  # space freed
    again = SynthRun(engine_harness.engine, run.out, concurrency=4)
    engine_harness.run(again.run(plan.todo))
    assert again.output_error is None
    assert sorted(r["utt"] for r in read_jsonl(run.out / RESULTS) if r["status"] == "ok") == sorted(
        r.utt for r in manifest.rows
    )
