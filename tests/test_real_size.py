"""One real-size Qwen3-TTS 0.6B request end to end (random weights): opt in with `scripts/test.sh --real-size`.

Not in the default suite (the checkpoint is 2.7 GB, the engine about 7 GB and minutes of CPU): the module
is skipped unless OMNI_REAL_SIZE=1. It builds the Base checkpoint with a stopping talker once, under
$OMNI_CACHE_DIR/models/ (reused after; checkpoints.real_size_checkpoint), runs `omni synth` of one demo
row through `--profile qwen3-tts` in a subprocess and checks what a CPU user relies on: the dtype and
thread choice printed at start (bfloat16 only where the CPU has it natively; the stages splitting the
cores), the row ending by EOS (`stop`), and no process left behind.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tests.processes import wait_gone

pytestmark = [
    pytest.mark.real_size,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(os.environ.get("OMNI_REAL_SIZE") != "1", reason="opt in: scripts/test.sh --real-size"),
]
REPO = Path(__file__).resolve().parents[1]
CAP = 200  # P(a geometric length of mean 25 frames reaching 200) is about 3e-4


def test_one_real_size_request_stops_with_the_cpu_choices_and_leaves_no_process(tmp_path):
    import subprocess
    import sys

    from omnicli.profile import load_profile
    from omnicli.profile.cpu_stages import resolve_cpu_stages
    from omnicli.vllm_omni.checkpoints import real_size_checkpoint

    ckpt = real_size_checkpoint(Path(os.environ.get("OMNI_CACHE_DIR", REPO / ".cache" / "omni-test")))
    manifest = tmp_path / "one.lst"
    demo = REPO / "omnicli" / "data" / "demo"
    first = next(line for line in (demo / "meta.lst").read_text().splitlines() if line and not line.startswith("#"))
    utt, prompt_text, wav, text = first.split("|")
    manifest.write_text(f"{utt}|{prompt_text}|{demo / wav}|{text}\n")
    marker = uuid.uuid4().hex
    env = {**os.environ, "OMNI_TEST_MARK": marker, "PYTHONPATH": str(REPO)}
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "omnicli", "synth", str(manifest), "--out", str(out), "--profile", "qwen3-tts",
         "--set", f"model_path={ckpt}", "--max-new-tokens", str(CAP), "--allow-outside-paths"],
        env=env, capture_output=True, text=True, timeout=3000, cwd=REPO,
    )
    left = wait_gone(marker, timeout=60)
    assert run.returncode == 0, run.stderr[-4000:]
    expected = resolve_cpu_stages(load_profile("qwen3-tts", platform="cpu").profile)  # same probe, same machine
    line = next((s for s in run.stderr.splitlines() if s.startswith("CPU stages:")), "")
    assert f"talker: {expected.talker.dtype}" in line and f"codec: {expected.codec.dtype}" in line, run.stderr[-4000:]
    assert f"threads talker {expected.talker_threads}, codec {expected.codec_threads}" in line
    (row,) = [json.loads(s) for s in (out / "results.jsonl").read_text().splitlines()]
    assert (row["status"], row["finish_reason"]) == ("ok", "stop"), row
    assert left == [], left
