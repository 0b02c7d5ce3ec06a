"""Signals sent to the `omni synth` process alone (not its process group, as `kill PID` or a
supervisor does), and a disk that fills up mid-run, each with the real vLLM engine.

Only `omni synth` gets the signal, so vLLM's engine core hears about it from us:
the documented outcome (summary written, exit 130, no process left) must not
depend on the terminal also signalling vLLM. Runs are started two at a time
(each pays an engine start-up); every run's environment carries a marker its
children inherit, which is how "no process left" is checked.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from omnicli.atomic import read_jsonl
from omnicli.synth.plan import RESULTS
from tests.conftest import DEMO_MANIFEST, TEST_PROFILE_SETS
from tests.processes import marked_processes, wait_gone

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parent.parent
ROWS = 8
START_TIMEOUT_S = 420  # engine start-up on a loaded 2-core machine, two at once
# "Not hanging" bounds: generous, because the rule is that the command ends, not how fast.
GRACEFUL_EXIT_S = 120
FORCED_EXIT_S = 60


class Run:
    """One `omni synth` process over an 8-row set, stdout+stderr to a log file."""

    def __init__(self, folder: Path, env: dict | None = None):
        folder.mkdir(parents=True)
        shutil.copytree(DEMO_MANIFEST.parent / "prompts", folder / "prompts")
        prompts = sorted(p.name for p in (folder / "prompts").glob("*.wav"))
        lines = [
            f"r{i}|Reference words.|prompts/{prompts[i % len(prompts)]}|Short line number {i}." for i in range(ROWS)
        ]
        (folder / "meta.lst").write_text("\n".join(lines) + "\n")
        self.out = folder / "out"
        self.log = folder / "cli.log"
        self.marker = uuid.uuid4().hex
        sets = [arg for s in TEST_PROFILE_SETS for arg in ("--set", s)]
        cmd = [sys.executable, str(REPO / "tests" / "fault_driver.py"), "synth", str(folder / "meta.lst"),
               "--out", str(self.out), "--profile", "cpu", *sets, "-c", "2"]
        full_env = {
            **os.environ,
            "OMNI_TEST_MARK": self.marker,
            "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            **(env or {}),
        }
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=full_env
            )

    def wait_for(self, condition, timeout: float = START_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if condition():
                return True
            time.sleep(0.2)
        return False

    def rows(self) -> int:
        return len(read_jsonl(self.out / RESULTS))

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)  # this process only: vLLM's engine core is not signalled

    def finish(self, timeout: float) -> tuple[int | None, float]:
        t0 = time.monotonic()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        return rc, time.monotonic() - t0

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def one_signal(sig: int):
    def scenario(run: Run) -> dict:
        reached = run.wait_for(lambda: run.rows() >= 1)
        run.signal(sig)
        rc, exit_s = run.finish(GRACEFUL_EXIT_S)
        return {"reached": reached, "rc": rc, "exit_s": exit_s, "left": wait_gone(run.marker, 30)}

    return scenario


def two_sigints(run: Run) -> dict:
    reached = run.wait_for(lambda: run.rows() >= 1)
    run.signal(signal.SIGINT)
    time.sleep(0.5)
    run.signal(signal.SIGINT)
    rc, exit_s = run.finish(FORCED_EXIT_S)
    return {"reached": reached, "rc": rc, "exit_s": exit_s, "left": wait_gone(run.marker, 30)}


def sigint_during_start_up(run: Run) -> dict:
    # vLLM's engine core is a child of ours: once it exists, the engine is starting.
    reached = run.wait_for(lambda: len(marked_processes(run.marker)) > 1)
    started_rows = run.rows()
    run.signal(signal.SIGINT)
    rc, exit_s = run.finish(FORCED_EXIT_S)
    return {"reached": reached and started_rows == 0, "rc": rc, "exit_s": exit_s, "left": wait_gone(run.marker, 30)}


def disk_fills_up(run: Run) -> dict:
    rc, exit_s = run.finish(START_TIMEOUT_S + 300)
    return {"rc": rc, "exit_s": exit_s, "left": wait_gone(run.marker, 30)}


SCENARIOS = {
    "sigint": (one_signal(signal.SIGINT), None),
    "sigterm": (one_signal(signal.SIGTERM), None),
    "sigint_twice": (two_sigints, None),
    "sigint_start_up": (sigint_during_start_up, None),
    "disk_full": (disk_fills_up, {"OMNI_FAULT_RESULTS_ROWS": "1"}),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    base = tmp_path_factory.mktemp("signals")
    runs: dict[str, Run] = {}

    def go(name: str):
        scenario, env = SCENARIOS[name]
        runs[name] = run = Run(base / name, env)
        return run, scenario(run)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(go, name) for name in SCENARIOS}
        try:
            yield {name: future.result() for name, future in futures.items()}
        finally:
            for run in runs.values():
                if run.proc.poll() is None:
                    run.proc.kill()
                wait_gone(run.marker, 10)


@pytest.mark.parametrize("name", ["sigint", "sigterm"])
def test_a_signal_to_omni_synth_alone_stops_it_gracefully(outcomes, name):
    run, seen = outcomes[name]
    output = run.output()
    print(f"\n{name} to omni synth alone: exit {seen['rc']} after {seen['exit_s']:.1f} s")
    assert seen["reached"], output[-3000:]
    assert seen["rc"] == 130, output[-3000:]
    assert seen["exit_s"] < GRACEFUL_EXIT_S
    assert not seen["left"], f"processes left after {name}: {seen['left']}"
    sig_name = "SIGINT" if name == "sigint" else "SIGTERM"
    assert f"{sig_name}: stopping; requests in flight get" in output
    assert "interrupted: finished work is kept" in " ".join(output.split())
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["num_failed"] == 0  # stopping is not failing
    assert summary["num_ok"] >= 1 and summary["num_ok"] + summary["num_pending"] == ROWS
    rows = read_jsonl(run.out / RESULTS)
    assert len(rows) == summary["num_ok"] and all(r["status"] == "ok" for r in rows)
    assert not list(run.out.glob(".*.tmp"))


def forced_exit_summary(outcome, message: str) -> dict:
    """Checks a forced exit (130, in time, `message` said, no vLLM process left); the run's summary."""
    run, seen = outcome
    output = run.output()
    print(f"\n{run.out.parent.name}: exit {seen['rc']} after {seen['exit_s']:.1f} s")
    assert seen["reached"], output[-3000:]
    assert seen["rc"] == 130, output[-3000:]
    assert seen["exit_s"] < FORCED_EXIT_S
    assert message in output
    assert not seen["left"], f"vLLM outlived a forced exit: {seen['left']}"
    return json.loads((run.out / "summary.json").read_text())


def test_a_second_sigint_forces_the_exit_and_ends_vllm(outcomes):
    summary = forced_exit_summary(outcomes["sigint_twice"], "SIGINT: forced exit; finished utterances are kept")
    assert summary["interrupted"] is True and summary["num_failed"] == 0
    assert summary["num_ok"] == len(read_jsonl(outcomes["sigint_twice"][0].out / RESULTS)) >= 1


def test_sigint_during_engine_start_up_exits_at_once_and_ends_vllm(outcomes):
    summary = forced_exit_summary(outcomes["sigint_start_up"], "SIGINT: forced exit")
    assert summary["interrupted"] is True and summary["num_ok"] == 0 and summary["num_pending"] == ROWS


def test_out_filling_up_mid_run_exits_4_naming_out_and_leaves_the_rest_pending(outcomes):
    run, seen = outcomes["disk_full"]
    output = run.output()
    assert seen["rc"] == 4, output[-3000:]
    lines = [line for line in output.splitlines() if line.startswith("error: cannot write ")]
    assert lines == [
        f"error: cannot write {run.out / RESULTS}: [Errno 28] No space left on device: '{run.out / RESULTS}'"
    ], output[-3000:]
    assert f"stopped: {ROWS - 1} utterance(s) left pending (not failed)" in output, output[-3000:]
    rows = read_jsonl(run.out / RESULTS)
    assert len(rows) == 1 and rows[0]["status"] == "ok"  # the row written before the disk filled up
    summary = json.loads((run.out / "summary.json").read_text())  # the fault is in results.jsonl only: room for it
    assert summary["num_failed"] == 0 and summary["num_pending"] == ROWS - 1 and "No space" in summary["output_error"]
    assert not seen["left"], f"processes left after the write error: {seen['left']}"
    assert not list(run.out.glob(".*.tmp"))
