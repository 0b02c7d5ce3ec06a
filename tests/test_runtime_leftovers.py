"""Engine runs leave nothing behind, without an engine: the run folder (vLLM's sockets, the deploy
overlay) and vLLM-Omni's /dev/shm wake-up folders removed on each exit path, the next run's sweep,
stage processes that a terminal's Ctrl-C does not reach, and a stage's end told as it happened."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from omnicli.runtime import run_folder
from omnicli.runtime.run_folder import RunFolder, wake_dir
from omnicli.runtime.signals import interrupts_blocked_for_children
from omnicli.vllm_omni.engine import _how_it_ended


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


def make_wake_dir(pid: int, shm_root: Path = run_folder.SHM_ROOT) -> Path:
    """What vLLM-Omni leaves: a folder named after a stage process, holding a FIFO."""
    path = wake_dir(pid, shm_root)
    path.mkdir(parents=True)
    os.mkfifo(path / f"0_{pid}")
    return path


def test_removing_a_run_folder_removes_the_wake_up_folders_of_its_processes_once_gone(tmp_path, sleeper):
    shm = tmp_path / "shm"
    folder = RunFolder(tmp_path, shm_root=shm)
    assert folder.path.name.startswith(f"omni-run-{os.getpid()}-")
    (folder.path / "deploy_overlay.yaml").write_text("base_config: x\n")
    gone, noted, running = dead_pid(), dead_pid(), sleeper.pid
    dirs = {pid: make_wake_dir(pid, shm) for pid in (gone, noted, running, os.getpid())}
    semaphores = {pid: shm / f"sem.loky-{pid}-7" for pid in (gone, running)}  # left by a forced exit
    for path in semaphores.values():
        path.write_bytes(b"\0" * 32)
    folder.note_pids([noted])
    folder.remove([gone, running])
    assert not folder.path.exists()
    assert [pid for pid, path in dirs.items() if path.exists()] == [running]  # still in use: kept
    assert [pid for pid, path in semaphores.items() if path.exists()] == [running]
    folder.remove()  # twice is harmless


def test_a_forced_exit_removes_every_run_folder_still_open(tmp_path):
    a, b = RunFolder(tmp_path), RunFolder(tmp_path)
    stage = dead_pid()
    path = make_wake_dir(stage, tmp_path / "shm")
    b.shm_root = tmp_path / "shm"
    run_folder.remove_live([stage])
    assert not a.path.exists() and not b.path.exists() and not path.exists()


def test_a_temp_folder_too_long_for_socket_paths_gives_way_to_tmp(tmp_path, monkeypatch):
    # vLLM's sockets go below the run folder: `ipc://<folder>/<uuid4>` must fit in 107 bytes.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / ("t" * 60)))
    folder = RunFolder()
    try:
        assert folder.path.parent == run_folder.SHORT_BASE
        assert len(str(folder.path)) + run_folder.SOCKET_NAME_LEN <= run_folder.SOCKET_PATH_MAX
    finally:
        folder.remove()
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert run_folder.default_base() == Path("/tmp")


KILLED_RUN = """
import sys, time
from pathlib import Path
from omnicli.runtime.run_folder import RunFolder
folder = RunFolder(Path(sys.argv[1]))
folder.note_pids([int(sys.argv[2])])
print(folder.path, flush=True)
time.sleep(300)
"""


def test_the_next_run_sweeps_the_folders_of_killed_runs_and_leaves_live_ones(tmp_path, sleeper):
    stage = dead_pid()
    stage_dir = make_wake_dir(stage, tmp_path / "shm")
    killed = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(tmp_path), str(stage)],
                              stdout=subprocess.PIPE, text=True)
    dead_folder = Path(killed.stdout.readline().strip())
    killed.kill()
    killed.wait()
    owner_dir = make_wake_dir(killed.pid, tmp_path / "shm")  # a stage that ran its worker in-process
    live = RunFolder(tmp_path)
    other = tmp_path / "omni-run-notes"  # not a run folder's name: never touched
    other.mkdir()
    try:
        assert run_folder.sweep(tmp_path, shm_root=tmp_path / "shm") == [dead_folder]
        assert not dead_folder.exists() and not stage_dir.exists() and not owner_dir.exists()
        assert live.path.is_dir() and other.is_dir()
    finally:
        live.remove()


GUARDED_RUN = """
import subprocess, sys, time
from omnicli.runtime.orphans import OrphanGuard
from omnicli.runtime.run_folder import RunFolder
folder = RunFolder()
guard = OrphanGuard(folder.path)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(folder.path, child.pid, flush=True)
time.sleep(300)
"""


def test_the_orphan_guard_removes_the_run_folder_of_a_parent_killed_with_sigkill(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", GUARDED_RUN], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    words = parent.stdout.readline().split()
    folder, child = Path(words[0]), psutil.Process(int(words[1]))
    stage_dir = make_wake_dir(child.pid)  # the real /dev/shm, as vLLM-Omni names it
    try:
        deadline = time.monotonic() + 30
        while str(child.pid) not in run_folder._noted_pids(folder) and time.monotonic() < deadline:
            time.sleep(0.1)  # the watcher notes the child in the folder
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while (folder.exists() or stage_dir.exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not child.is_running() and not folder.exists() and not stage_dir.exists()
    finally:
        with contextlib.suppress(psutil.Error):
            child.kill()
        with contextlib.suppress(OSError):
            (stage_dir / f"0_{child.pid}").unlink()
            stage_dir.rmdir()


def _spawn_sleeper(ctx, started: list) -> None:
    proc = ctx.Process(target=time.sleep, args=(300,))
    proc.start()
    started.append(proc)


def test_processes_started_with_interrupts_blocked_ignore_a_terminals_ctrl_c_and_end_on_sigterm():
    # A terminal's Ctrl-C reaches the whole process group: vLLM-Omni's stage processes each died
    # in the middle of their imports, printing a KeyboardInterrupt traceback (about 100 lines).
    ctx = multiprocessing.get_context("spawn")
    started: list = []

    def start_from_a_thread():  # as vLLM-Omni starts its stages, from threads of the start-up thread
        worker = threading.Thread(target=_spawn_sleeper, args=(ctx, started))
        worker.start()
        worker.join()

    # Both children start with Python's own SIGINT handling, whatever an earlier test in this process left
    # (after test_reliability_cli.py the disposition was SIG_IGN, which a child inherits: then neither dies).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts_blocked_for_children():
            start_from_a_thread()
        _spawn_sleeper(ctx, started)  # started as before: Ctrl-C ends it
    finally:
        signal.signal(signal.SIGINT, before)
    shielded, plain = started
    try:
        deadline = time.monotonic() + 60
        while not all(psutil.Process(p.pid).cmdline() for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.0)  # both interpreters have started (and installed Python's SIGINT handler)
        for p in started:
            os.kill(p.pid, signal.SIGINT)
        plain.join(60)
        shielded.join(2.0)
        assert plain.exitcode is not None and shielded.is_alive()
        shielded.terminate()
        shielded.join(30)
        assert shielded.exitcode == -signal.SIGTERM
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGINT}  # ours is back as it was
    finally:
        for p in started:
            p.kill()


def test_a_stage_process_that_was_killed_is_told_as_killed_with_no_stack_trace_claimed():
    # Was: "EngineCore encountered an issue. See stack trace (above) for the root cause." after
    # kill -9 of a stage, which prints nothing.
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    killed.kill()
    failed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    for proc in (killed, failed):
        while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.02)
    try:
        said = _how_it_ended(killed.pid)
        assert said.startswith("was killed by SIGKILL") and "prints no error" in said and "stack trace" not in said
        assert _how_it_ended(failed.pid).startswith("exited with status 3")
        assert psutil.Process(killed.pid).status() == psutil.STATUS_ZOMBIE  # looked at, not reaped
        assert _how_it_ended(dead_pid() + 10_000_000) == "is gone"  # not a child of ours
    finally:
        assert killed.wait() == -signal.SIGKILL and failed.wait() == 3


def test_a_stage_process_already_reaped_by_vllm_is_still_told_as_killed():
    # vLLM's process manager waits on each stage's sentinel and reaps it at once: the code is
    # then only in the multiprocessing.Process object, which the engine keeps from its start.
    proc = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(300,))
    proc.start()
    try:
        os.kill(proc.pid, signal.SIGKILL)
        multiprocessing.connection.wait([proc.sentinel], 60)  # reaped, as vLLM's monitor does it
        deadline = time.monotonic() + 60
        while proc.exitcode is None and time.monotonic() < deadline:  # the pipe closes just before the exit
            time.sleep(0.01)
        assert proc.exitcode == -signal.SIGKILL
        assert _how_it_ended(proc.pid) == "is gone"  # reaped: the pid alone no longer tells
        assert _how_it_ended(proc.pid, proc).startswith("was killed by SIGKILL")
    finally:
        proc.kill()
