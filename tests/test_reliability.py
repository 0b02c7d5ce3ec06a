"""Reliability without an engine: bad references, resume planning, crash leftovers, locks, signals, orphans."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import soundfile as sf

from omnicli.atomic import read_jsonl
from omnicli.driver.inputs import InputError, request_from_row
from omnicli.manifest import ManifestRow, read_manifest
from omnicli.runtime.signals import StopSignals
from omnicli.synth.plan import LOCK, RESULTS, OutputBusy, OutputLock, input_digest, plan_run, tidy_out_dir
from tests.conftest import fill_up

SR = 24_000


# -- bad reference audio: a per-row InputError naming file and line ---------------------------


def row_with_ref(path: Path) -> ManifestRow:
    return ManifestRow(utt="u", text="Hi.", prompt_wav=path, line_no=7, source=Path("/data/meta.lst"))


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: p.write_bytes(b""), "file is empty"),
        (lambda p: p.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt garbage"), "unreadable or unsupported"),
        (lambda p: p.write_text("this is not audio at all\n" * 20), "unreadable or unsupported"),
        (lambda p: sf.write(p, np.array([0.1, np.nan, 0.2] * 100, np.float32), 16000, subtype="FLOAT"), "NaN"),
        (lambda p: sf.write(p, np.zeros((0,), np.float32), 16000), "no samples"),
    ],
    ids=["empty", "corrupt", "not-audio", "nan", "zero-samples"],
)
def test_bad_reference_is_an_input_error_naming_the_row(tmp_path, make, why):
    ref = tmp_path / "ref.wav"
    make(ref)
    with pytest.raises(InputError) as exc:
        request_from_row(row_with_ref(ref))
    assert str(exc.value).startswith("/data/meta.lst:7: reference audio:") and why in str(exc.value)


def test_stereo_reference_at_any_rate_is_loaded_for_conversion(tmp_path):
    ref = tmp_path / "stereo8k.wav"
    sf.write(ref, np.full((800, 2), 0.1, np.float32), 8000)
    request = request_from_row(row_with_ref(ref), seed=3)
    assert request.ref_audio.shape == (800, 2) and request.ref_sample_rate == 8000 and request.seed == 3


# -- resume planning and crash leftovers --------------------------------------------------------


def manifest_of(tmp_path: Path, n: int):
    lines = [f"u{i}|||Sentence {i}." for i in range(n)]
    (tmp_path / "meta.lst").write_text("\n".join(lines) + "\n")
    return read_manifest(tmp_path / "meta.lst")


def finished(out: Path, row: ManifestRow, seconds: float = 0.5, status: str = "ok") -> dict:
    if status == "ok":
        sf.write(out / f"{row.utt}.wav", np.zeros(int(seconds * SR), np.float32), SR, subtype="PCM_16")
    return {
        "utt": row.utt,
        "status": status,
        "line": row.line_no,
        "audio_seconds": seconds,
        "input_digest": input_digest(row),
        "profile_digest": "p1",
    }


def write_results(out: Path, rows: list[dict], tail: bytes = b"") -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS).write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + tail)


def test_plan_skips_done_redoes_damaged_changed_and_missing(tmp_path):
    m = manifest_of(tmp_path, 6)
    out = tmp_path / "out"
    out.mkdir()
    r = m.rows
    rows = [
        finished(out, r[0]),
        finished(out, r[1]),
        finished(out, r[2]),
        finished(out, r[3], status="failed"),
        finished(out, r[4]),
    ]
    (out / "u1.wav").write_bytes((out / "u1.wav").read_bytes()[:100])  # truncated behind our back
    rows[2]["input_digest"] = "0" * 16  # the manifest row was edited since
    write_results(out, rows, tail=b'{"utt": "u5", "status": "o')  # torn last line of a killed run
    plan = plan_run(m, out)
    assert plan.done == ["u0", "u4"]
    assert plan.failed_before == ["u3"]
    assert plan.changed == ["u2"]
    assert [x.utt for x in plan.todo] == ["u1", "u2", "u5"]
    retry = plan_run(m, out, retry_failed=True)
    assert [x.utt for x in retry.todo] == ["u1", "u2", "u3", "u5"]
    assert plan_run(m.limited(2), out).done == ["u0"]
    assert plan_run(m, out, profile_digest="p2").other_profiles == {"p1"}


def test_tidy_removes_temp_files_and_keeps_one_row_per_utterance(tmp_path):
    m = manifest_of(tmp_path, 3)
    out = tmp_path / "out"
    out.mkdir()
    first = finished(out, m.rows[0], status="failed")
    again = finished(out, m.rows[0])
    other = finished(out, m.rows[1])
    write_results(out, [first, other, again], tail=b'{"utt": "u2"')
    (out / ".u2.wav.abc12_xy.tmp").write_bytes(b"half a wav")  # mkstemp names of omnicli.atomic
    (out / ".results.jsonl.k2j4h5g6.tmp").write_bytes(b"")
    (out / ".notes.tmp").write_text("not ours: kept")
    assert tidy_out_dir(out) == 2
    assert sorted(p.name for p in out.iterdir()) == [".notes.tmp", "results.jsonl", "u0.wav", "u1.wav"]
    rows = read_jsonl(out / RESULTS)
    assert [(x["utt"], x["status"]) for x in rows] == [("u0", "ok"), ("u1", "ok")]
    assert (out / RESULTS).read_bytes().endswith(b"\n")
    before = (out / RESULTS).stat().st_mtime_ns
    tidy_out_dir(out)
    assert (out / RESULTS).stat().st_mtime_ns == before  # already tidy: not rewritten


def test_results_rows_are_whole_or_absent_when_the_disk_fills(small_fs):
    # Was: the line being written when the disk filled stayed cut off in results.jsonl.
    from omnicli.atomic import JsonlAppender

    row = {"utt": "u", "status": "ok", "error": "x" * 900}  # ~1 KB: some rows straddle a page
    written = 0
    with JsonlAppender(small_fs / RESULTS) as results:
        results.append(row)
        fill_up(small_fs, leave=6000)
        with pytest.raises(OSError) as exc:
            for _ in range(100):
                results.append(row)
                written += 1
    assert exc.value.errno == errno.ENOSPC and written >= 1
    data = (small_fs / RESULTS).read_bytes()
    assert data.endswith(b"\n") and len(data.splitlines()) == written + 1
    assert all(json.loads(line) == row for line in data.splitlines())


def test_tidy_cuts_a_torn_last_line_even_on_a_full_disk(small_fs):
    # Was: a re-run with nothing to do left the torn line, so every JSON reader of the file failed.
    from omnicli.synth.results import SynthResult

    out = small_fs
    whole = SynthResult(utt="u0", status="ok").to_line().encode() + b"\n"  # as synth writes it
    (out / RESULTS).write_bytes(whole + b'{"utt": "u1", "sta')
    fill_up(out)
    tidy_out_dir(out)
    assert (out / RESULTS).read_bytes() == whole


def test_written_files_follow_the_umask(tmp_path):
    # Was: wavs, summary.json and retained files were created 0600 (mkstemp's mode).
    from omnicli.atomic import JsonlAppender, write_json_atomic
    from omnicli.audio import write_wav_atomic

    old = os.umask(0o027)
    try:
        paths = [
            write_json_atomic(tmp_path / "summary.json", {}),
            write_wav_atomic(tmp_path / "u.wav", np.zeros(10, np.float32), SR),
        ]
        with JsonlAppender(tmp_path / RESULTS) as results:
            results.append({"utt": "u"})
        paths.append(tmp_path / RESULTS)
    finally:
        os.umask(old)
    assert {oct(p.stat().st_mode & 0o777) for p in paths} == {oct(0o640)}


def test_output_lock_is_exclusive_and_released(tmp_path):
    with OutputLock(tmp_path / "out"):
        with pytest.raises(OutputBusy, match="in use by another"):
            OutputLock(tmp_path / "out")
        # Another process sees it too (an OS lock, released by the OS even on SIGKILL).
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import fcntl, sys\ntry:\n fcntl.flock(open(sys.argv[1], 'a'), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                "except BlockingIOError: sys.exit(7)",
                str(tmp_path / "out" / LOCK),
            ],
            timeout=60,
        )
        assert probe.returncode == 7
    OutputLock(tmp_path / "out").release()


# -- Ctrl-C / SIGTERM: first asks, second forces ------------------------------------------------


def test_stop_signals_first_asks_then_forces_and_restores_handlers():
    calls = []
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGHUP)}
    with StopSignals(lambda s: calls.append(("first", s)), lambda s: calls.append(("force", s))) as signals:
        os.kill(os.getpid(), signal.SIGHUP)  # ssh session closed: a stop like SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert signals.count == 2
    assert calls == [("first", signal.SIGHUP), ("force", signal.SIGTERM)]
    assert {sig: signal.getsignal(sig) for sig in before} == before


# -- the orphan guard: children die with a parent killed by SIGKILL ------------------------------

GUARDED_PARENT = """
import subprocess, sys, time
from omnicli.runtime.orphans import OrphanGuard
guard = OrphanGuard()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, guard.watcher_pid, flush=True)
if sys.argv[1] == "disarm":
    time.sleep(1.5)  # the watcher has seen the child
    guard.disarm()
    print("disarmed", flush=True)
time.sleep(300)
"""


def spawn_guarded(mode: str) -> tuple[subprocess.Popen, psutil.Process, psutil.Process]:
    parent = subprocess.Popen([sys.executable, "-c", GUARDED_PARENT, mode], stdout=subprocess.PIPE, text=True)
    child_pid, watcher_pid = map(int, parent.stdout.readline().split())
    return parent, psutil.Process(child_pid), psutil.Process(watcher_pid)


def test_orphan_guard_ends_children_of_a_killed_parent():
    parent, child, watcher = spawn_guarded("arm")
    time.sleep(1.5)  # the watcher polls for new children twice a second
    parent.kill()
    parent.wait()
    gone, alive = psutil.wait_procs([child, watcher], timeout=15)
    for p in alive:
        p.kill()
    assert not alive, f"still running after the parent was killed: {alive}"


def test_disarmed_guard_leaves_children_alone():
    parent, child, watcher = spawn_guarded("disarm")
    try:
        assert parent.stdout.readline().strip() == "disarmed"
        psutil.wait_procs([watcher], timeout=10)
        parent.kill()
        parent.wait()
        time.sleep(1.0)
        assert child.is_running() and not watcher.is_running()
    finally:
        child.kill()
        parent.kill()


# Our engine's children as vLLM-Omni starts them: multiprocessing spawn, with the warning filter
# every command adds (`-Wignore:resource_tracker:UserWarning`), and a real resource tracker.
SPAWNING_PARENT = """
import multiprocessing, time
from multiprocessing import resource_tracker
from omnicli.commands.interrupts import quiet_resource_tracker
from omnicli.runtime.orphans import OrphanGuard
quiet_resource_tracker()
guard = OrphanGuard()
ctx = multiprocessing.get_context("spawn")
lock = ctx.Lock()  # starts the resource tracker (a semaphore to track)
child = ctx.Process(target=time.sleep, args=(300,))
child.start()
print(child.pid, resource_tracker._resource_tracker._pid, flush=True)
time.sleep(300)
"""


def test_the_resource_tracker_test_spares_the_tracker_alone():
    # Was: "resource_tracker" anywhere in the command line, so the warning filter we give every
    # spawned child made each of them pass for a tracker.
    from omnicli.runtime.orphans import is_resource_tracker

    parent = subprocess.Popen([sys.executable, "-c", SPAWNING_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child_pid, tracker_pid = map(int, parent.stdout.readline().split())
        child, tracker = psutil.Process(child_pid), psutil.Process(tracker_pid)
        deadline = time.monotonic() + 30
        while not (child.cmdline() and tracker.cmdline()) and time.monotonic() < deadline:
            time.sleep(0.05)  # between fork and exec a process shows no command line
        assert "-Wignore:resource_tracker:UserWarning" in child.cmdline()
        assert is_resource_tracker(tracker) and not is_resource_tracker(child)
        time.sleep(1.5)  # the watcher polls for new children twice a second
        parent.kill()
        parent.wait()
        _, alive = psutil.wait_procs([child], timeout=15)
        assert not alive, "a spawned child outlived its killed parent (SIGTERM during start-up left stage workers)"
    finally:
        with contextlib.suppress(psutil.Error, OSError, UnboundLocalError):
            parent.kill()
            child.kill()


# -- the command's signal handling, with a stand-in for the engine process ---------------------

SESSION_SCRIPT = """
import asyncio, subprocess, sys, time
from pathlib import Path
from types import SimpleNamespace
from omnicli.commands.synth_console import SynthConsole
from omnicli.profile import load_profile
from omnicli.synth import RunPhase, SynthArgs, SynthJob

mode, folder = sys.argv[1], Path(sys.argv[2])
console = SynthConsole(folder / "meta.lst")
job = SynthJob(SynthArgs(folder / "meta.lst", folder / "out", load_profile("cpu")), console, console.stop_request)
console.attach(job)
job.prepare()  # the manifest read, OUT locked and planned
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # stands in for vLLM's engine core
with console.signal_scope:
    console.phase_changed(RunPhase.STARTING)  # the job's signal policy starts here
    import multiprocessing
    lock = multiprocessing.get_context("spawn").Lock()  # registered with a resource tracker, like vLLM's
    if mode == "starting":  # engine start-up blocks the main thread
        print("ready", child.pid, flush=True)
        child.wait()  # a forced exit ends the engine core: vLLM's start-up then fails in the main thread
        from omnicli.engine.request import EngineError

        job.engine_error = EngineError("engine failed to start: the talker (vLLM) failed to start: "
                                       "RuntimeError: Engine core initialization failed")
        job.finish()
        time.sleep(300)
    else:
        async def main():
            loop = asyncio.get_running_loop()
            job.run_obj = SimpleNamespace(stop=asyncio.Event(), grace_s=5.0, results=[], wall_seconds=0.0,
                                          output_error=None, engine_error=None, left_pending=["u1"],
                                          model_name="stand-in")
            job.stop.subscribe(lambda: loop.call_soon_threadsafe(job.run_obj.stop.set))
            console.phase_changed(RunPhase.RUNNING)
            print("ready", child.pid, flush=True)
            await job.run_obj.stop.wait()
            print("stopping", flush=True)
            if mode == "graceful":  # the run winds down and the job writes its summary
                job.finish()
                print("interrupted", flush=True)
                child.kill()
                sys.exit(130 if console.interrupted else 0)
            await asyncio.sleep(300)  # a shutdown that hangs: only a second signal gets out
        asyncio.run(main())
"""


@contextlib.contextmanager
def run_session(tmp_path: Path, mode: str) -> Iterator[tuple[subprocess.Popen, psutil.Process]]:
    """The session script and its stand-in engine process, both killed when the test is done."""
    (tmp_path / "meta.lst").write_text("u1|||One.\nu2|||Two.\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", SESSION_SCRIPT, mode, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes: list = [proc]
    try:
        word, pid = proc.stdout.readline().split()
        assert word == "ready"
        processes.append(psutil.Process(int(pid)))
        yield proc, processes[1]
    finally:
        for p in processes:
            with contextlib.suppress(psutil.Error, OSError):
                p.kill()


def assert_forced_exit(proc: subprocess.Popen, child: psutil.Process, tmp_path: Path) -> None:
    t0 = time.monotonic()
    assert proc.wait(30) == 130
    assert time.monotonic() - t0 < 10
    psutil.wait_procs([child], timeout=5)
    assert not child.is_running()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["num_pending"] == 2
    assert summary["engine_error"] is None  # the stop was asked for: not an engine failure
    stderr = proc.stderr.read()
    assert "forced exit" in stderr
    assert "leaked semaphore" not in stderr  # was printed by the resource tracker after the exit


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_ctrl_c_during_engine_start_up_exits_at_once_and_ends_the_engine(tmp_path, sig):
    # SIGHUP (ssh session closed) was not handled: exit 129, no summary. A start-up
    # that fails because the stop ended vLLM's engine core was recorded as an engine error.
    with run_session(tmp_path, "starting") as (proc, child):
        proc.send_signal(sig)
        assert_forced_exit(proc, child, tmp_path)


def test_second_ctrl_c_forces_exit_when_the_graceful_stop_hangs(tmp_path):
    with run_session(tmp_path, "running") as (proc, child):
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "stopping"  # the first signal only asked the run to stop
        assert proc.poll() is None and child.is_running()
        proc.send_signal(signal.SIGTERM)
        assert_forced_exit(proc, child, tmp_path)


def test_a_closed_terminal_stops_the_run_like_sigterm(tmp_path):
    # The real hang-up: the command's terminal closes, the kernel sends SIGHUP and every
    # later write to the terminal fails (EIO). Was: exit 129; then, with SIGHUP caught,
    # the "stopping" message raised EIO on the signal thread before the stop was requested.
    import pty

    (tmp_path / "meta.lst").write_text("u1|||One.\nu2|||Two.\n")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the stand-in session with the pty as its controlling terminal
        os.execv(sys.executable, [sys.executable, "-c", SESSION_SCRIPT, "graceful", str(tmp_path)])
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while not (b"ready" in seen and seen.endswith(b"\n")) and time.monotonic() < deadline:
            seen += os.read(fd, 1024)  # the whole line: the session is then waiting for its stop
        assert b"ready" in seen
    finally:
        os.close(fd)  # the terminal goes away
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the session did not stop after its terminal closed")
    assert os.waitstatus_to_exitcode(done[1]) == 130
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["engine_error"] is None
