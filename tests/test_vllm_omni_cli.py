"""`omni synth` on a vLLM-Omni family, as a user runs it, interrupted with Ctrl-C.

Its own engines (a second and third start in the session: 1-5 minutes on a
loaded 2-core machine; the start-up one is stopped early). Documented
outcomes: exit 130, the rows finished before the signal kept whole (wav +
results row), the rest pending, no process left, no file left in the temp
folder or /dev/shm, no traceback.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
import soundfile as sf

from omnicli.atomic import read_jsonl
from omnicli.synth.plan import RESULTS
from tests.conftest import DEMO_MANIFEST, REPO
from tests.processes import marked_processes, wait_gone

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1200)]
pytest.importorskip("vllm_omni", reason="vLLM-Omni is not installed (pip install 'omnicli[vllm-omni]')")

START_TIMEOUT_S = 900
ROWS = 8


@pytest.fixture
def run_tmpdir():
    """The run's own temp folder (TMPDIR), to see what it leaves there. Short, whatever pytest's
    folders are: vLLM's socket paths below it must fit in 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="omni-vc-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def start_synth(tmp_path: Path, tmpdir: Path) -> tuple[subprocess.Popen, str]:
    """`omni synth` of ROWS rows on a tiny Qwen3-TTS, in its own session, with `tmpdir` as its temp
    folder; output in tmp_path/"cli.log"."""
    from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    ckpt = tmp_path / "qwen3-base"
    build_tiny_qwen3_tts(ckpt, seed=0, kind="base")
    shutil.copytree(DEMO_MANIFEST.parent / "prompts", tmp_path / "prompts")
    prompts = sorted(p.name for p in (tmp_path / "prompts").glob("*.wav"))
    lines = [
        f"r{i}|Reference words.|prompts/{prompts[i % len(prompts)]}|Line number {i} of the set." for i in range(ROWS)
    ]
    (tmp_path / "meta.lst").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    marker = uuid.uuid4().hex
    cmd = [
        sys.executable,
        "-m",
        "omnicli",
        "synth",
        str(tmp_path / "meta.lst"),
        "--out",
        str(out),
        "--profile",
        "qwen3-tts",
        "--set",
        f"model_path={ckpt}",
        "--set",
        "talker.dtype=bfloat16",
        "--set",
        "talker.max_num_seqs=2",
        "--set",
        "codec.max_num_seqs=2",
        "-c",
        "2",
        "--max-new-tokens",
        "24",
    ]
    env = {
        **os.environ,
        "OMNI_TEST_MARK": marker,
        "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TMPDIR": str(tmpdir),
    }
    with open(tmp_path / "cli.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return proc, marker


def assert_nothing_left(tmpdir: Path, pids: set[int]) -> None:
    """No socket, run folder or overlay in the run's temp folder (torch's own compile cache aside),
    no vLLM-Omni wake-up folder or semaphore in /dev/shm for any of the run's processes."""
    from omnicli.runtime.run_folder import wake_dir

    left = sorted(p.name for p in tmpdir.iterdir() if not p.name.startswith("torchinductor_"))
    assert not left, left
    assert not [str(wake_dir(pid)) for pid in pids if wake_dir(pid).exists()]
    assert not [p.name for pid in pids for p in Path("/dev/shm").glob(f"sem.loky-{pid}-*")]


def test_ctrl_c_exits_130_keeping_finished_rows_and_no_process(tmp_path, run_tmpdir):
    proc, marker = start_synth(tmp_path, run_tmpdir)
    out = tmp_path / "out"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline and not (out / RESULTS).exists():
            time.sleep(0.5)
        while proc.poll() is None and time.monotonic() < deadline and not read_jsonl(out / RESULTS):
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
        pids = {p.pid for p in marked_processes(marker)} | {proc.pid}
        assert len(pids) > 1, "the engine's processes should carry the marker"
        os.kill(proc.pid, signal.SIGINT)  # `omni` alone: vLLM-Omni's stages hear of it from us
        rc = proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = wait_gone(marker, 60)
    log_text = (tmp_path / "cli.log").read_text()
    assert rc == 130, log_text[-3000:]
    assert not left, left
    assert "Traceback" not in log_text, log_text[-3000:]
    # Was: 14 ZMQ sockets in $TMPDIR and a /dev/shm/omni_shm_wake_0_<pid> folder per stage, exit 0 too
    assert_nothing_left(run_tmpdir, pids)
    rows = read_jsonl(out / RESULTS)
    assert 1 <= len(rows) < ROWS, log_text[-2000:]
    for row in rows:
        if row["status"] == "ok":  # at the cap 23 frames; a stop token (random weights) ends it sooner
            data, sr = sf.read(out / row["wav"], dtype="float32")
            assert sr == 24000 and len(data) % 1920 == 0 and 0 < len(data) <= 23 * 1920
            assert (row["finish_reason"] == "length") == (len(data) == 23 * 1920)
    assert not list(out.glob("*.tmp*")) and not list(out.glob(".*.tmp*"))
    # the deploy overlay the profile became is kept with the run (whole: written atomically)
    assert "base_config:" in (out / "deploy_overlay.yaml").read_text()


def test_ctrl_c_in_the_terminal_during_start_up_prints_one_line_and_leaves_nothing(tmp_path, run_tmpdir):
    # The terminal's Ctrl-C reaches the whole process group. Was: about 100 lines of KeyboardInterrupt
    # tracebacks from the stage processes (interrupted in their imports); stage workers spared by the
    # orphan guard (their command line holds our -Wignore:resource_tracker filter) running on for
    # 30-45 s after omni had exited; the overlay's temp folder and vLLM's sockets left behind.
    proc, marker = start_synth(tmp_path, run_tmpdir)
    seen: set[int] = {proc.pid}
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline and not (tmp_path / "out" / RESULTS).exists():
            running = marked_processes(marker)
            seen |= {p.pid for p in running}
            if any(_is_stage(p, proc.pid) for p in running):  # a stage process started: the middle of start-up
                break
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = wait_gone(marker, 30)
    log_text = (tmp_path / "cli.log").read_text()
    assert rc == 130, log_text[-3000:]
    assert not left, left
    assert "Traceback" not in log_text and "KeyboardInterrupt" not in log_text, log_text[-5000:]
    after = log_text[log_text.index("SIGINT"):].strip().splitlines()
    assert after[0].startswith("SIGINT: forced exit") and len(after) <= 3, after
    assert_nothing_left(run_tmpdir, seen)


def _is_stage(process: psutil.Process, omni_pid: int) -> bool:
    """A vLLM-Omni stage process: a spawned child of omni (before vLLM titles it StageEngineCoreProc, its
    command line is multiprocessing's spawn_main), not the orphan watcher nor the resource tracker. Its
    worker runs inside it on CPU (cpu_stage.py), so a worker process is no sign of start-up any more."""
    try:
        command = " ".join(process.cmdline())
        return process.ppid() == omni_pid and ("spawn_main" in command or "StageEngineCoreProc" in command)
    except psutil.Error:
        return False
