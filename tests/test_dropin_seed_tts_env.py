"""Issue 32 item 6: vLLM-Omni's SEED_TTS_* variables are named once, with omni's own way, when set; omni's
environment variables are in `omni bench --help`."""

from __future__ import annotations

from typer.testing import CliRunner

from omnicli.benchmark.seed_tts_env import SEED_TTS_VARS, seed_tts_env_notes
from omnicli.cli import app
from tests.fakes import write_manifest

runner = CliRunner()


def test_only_the_variables_set_are_named():
    assert seed_tts_env_notes({}) == []
    notes = seed_tts_env_notes({"SEED_TTS_HF_WHISPER_MODEL": "openai/whisper-large-v3", "SEED_TTS_SIM_EVAL": "",
                                "PATH": "/bin"})
    assert notes == ["$SEED_TTS_HF_WHISPER_MODEL is vLLM-Omni's and ignored here: use --eval-asr"]
    assert {"SEED_TTS_HF_WHISPER_MODEL", "SEED_TTS_EVAL_DEVICE", "SEED_TTS_WER_SAVE_AUDIO_DIR", "SEED_TTS_SIM_EVAL",
            "SEED_TTS_UTMOS_EVAL", "SEED_TTS_WAVLM_MODEL"} <= set(SEED_TTS_VARS)


def test_a_bench_run_names_them_once(token_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("SEED_TTS_EVAL_DEVICE", "cuda:0")
    monkeypatch.setenv("SEED_TTS_WER_SAVE_AUDIO_DIR", str(tmp_path / "wavs"))
    result = runner.invoke(app, ["bench", str(write_manifest(tmp_path, ["one two"])), "--result-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.count("$SEED_TTS_EVAL_DEVICE is vLLM-Omni's and ignored") == 1
    assert "$SEED_TTS_WER_SAVE_AUDIO_DIR is vLLM-Omni's and ignored here: use --audio-out DIR" in result.output


def test_omnis_environment_variables_are_in_the_help():
    words = "".join(runner.invoke(app, ["bench", "--help"]).output.split())  # wrapping-proof
    for name in ("OMNI_FAILED_SPEECH_AUDIO_DIR", "OMNI_CACHE_DIR", "OMNI_PROFILES_DIR",
                 "VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S"):
        assert name in words
