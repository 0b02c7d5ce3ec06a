"""`omni synth` on a vLLM-Omni family, as a user runs it, interrupted with Ctrl-C (SIGINT to `omni` alone).

Its own engine (a second start in the session: 1-5 minutes on a loaded
2-core machine). Documented outcome: exit 130, the rows finished before the
signal kept whole (wav + results row), the rest pending, no process left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

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


def test_ctrl_c_exits_130_keeping_finished_rows_and_no_process(tmp_path):
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
    }
    with open(tmp_path / "cli.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline and not (out / RESULTS).exists():
            time.sleep(0.5)
        while proc.poll() is None and time.monotonic() < deadline and not read_jsonl(out / RESULTS):
            time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
        assert marked_processes(marker), "the engine's processes should carry the marker"
        os.kill(proc.pid, signal.SIGINT)  # `omni` alone: vLLM-Omni's stages hear of it from us
        rc = proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = wait_gone(marker, 60)
    log_text = (tmp_path / "cli.log").read_text()
    assert rc == 130, log_text[-3000:]
    assert not left, left
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
