"""Issue 32 item 10: scripts/vllm, the wrapper that answers vLLM-Omni's `vllm bench serve --omni ...` with
`omni bench`, fed the command line bench_tts.py's `build_bench_args` builds (reproduced from reading
vLLM-Omni's benchmarks/tts/bench_tts.py: the script is not packaged). No engine starts: the dataset folder
does not exist, so the run stops at option checking, after every flag of the line was taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

WRAPPER = REPO / "scripts" / "vllm"


def bench_tts_args(*, task: str, dataset_path: str, concurrency: int, num_prompts: int, output_dir: str,
                   result_filename: str, task_extra_body: dict) -> list[str]:
    """bench_tts.py's build_bench_args for one (task, concurrency) run, after the binary."""
    dataset = {"voice_clone": "seed-tts", "default_voice": "seed-tts-text", "voice_design": "seed-tts-design"}[task]
    return ["bench", "serve", "--omni", "--host", "localhost", "--port", "8000", "--model",
            "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "--backend", "openai-audio-speech", "--endpoint",
            "/v1/audio/speech", "--dataset-name", dataset, "--num-prompts", str(num_prompts), "--num-warmups", "2",
            "--percentile-metrics", "ttft,e2el,audio_rtf,audio_ttfp,audio_duration,audio_underrun",
            "--dataset-path", dataset_path, "--seed-tts-locale", "en",
            "--extra-body", json.dumps(task_extra_body, separators=(",", ":")), "--trust-remote-code",
            "--max-concurrency", str(concurrency), "--request-rate", "inf", "--seed-tts-wer-eval",
            "--hf-output-len", "64", "--save-result", "--result-dir", output_dir, "--result-filename",
            result_filename]


def run_wrapper(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMNI_COMMAND": f"{sys.executable} -m omnicli", "PYTHONPATH": str(REPO)}
    return subprocess.run([str(WRAPPER), *args], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def test_bench_tts_lines_reach_omni_bench_through_the_wrapper(tmp_path):
    for task, body in (("voice_clone", {"task_type": "Base"}), ("default_voice", {"voice": "Vivian"}),
                       ("voice_design", {"task_type": "VoiceDesign"})):
        done = run_wrapper(bench_tts_args(task=task, dataset_path=str(tmp_path / "absent"), concurrency=1,
                                          num_prompts=2, output_dir=str(tmp_path), result_filename="r.json",
                                          task_extra_body=body))
        assert done.returncode == 2, done.stdout + done.stderr
        text = " ".join((done.stdout + done.stderr).split())
        assert "No such option" not in text
        assert "no such local folder" in text  # the first check after parsing: the dataset folder
        assert "--omni: vLLM-Omni's benchmark mode" in text


def test_the_wrapper_refuses_other_vllm_commands():
    done = run_wrapper(["serve", "Qwen/Qwen3-TTS"])
    assert done.returncode == 2 and "runs only 'vllm bench serve" in done.stderr
