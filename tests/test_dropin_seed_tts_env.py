"""Issue 32 item 6: vLLM-Omni's SEED_TTS_* variables honoured where they configure what `omni bench --eval`
does (read as vLLM-Omni reads them), the others named once as ignored; omni's environment variables are in
`omni bench --help`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli.benchmark.seed_tts_env import HONOURED, IGNORED, SEED_TTS_VARS, seed_tts_env_notes, seed_tts_eval
from omnicli.cli import app
from tests.fakes import write_manifest

runner = CliRunner()


def plan(env, metrics=None, audio_out=None, asr=None, wer_flag=False, locale="en"):
    return seed_tts_eval(metrics, audio_out, asr, wer_flag=wer_flag, result_dir=Path("res"), locale=locale,
                         environ=env)


def test_the_wer_pass_and_what_configures_it_are_honoured(tmp_path):
    env = {"SEED_TTS_WER_EVAL": "true", "SEED_TTS_SIM_EVAL": "on", "SEED_TTS_HF_WHISPER_MODEL": "openai/whisper-tiny",
           "SEED_TTS_EVAL_DEVICE": "cuda:1", "SEED_TTS_WER_SAVE_AUDIO_DIR": str(tmp_path / "wavs")}
    got = plan(env)
    assert (got.metrics, got.audio_out, got.asr, got.device) == (
        "wer,sim", tmp_path / "wavs", "transformers:openai/whisper-tiny", "cuda:1")
    assert len(got.notes) == 5 and all(n.startswith("$SEED_TTS_") for n in got.notes)
    # Without the variables: --seed-tts-wer-eval's own defaults; SIM stays off, as in vLLM-Omni.
    bare = plan({}, wer_flag=True)
    assert (bare.metrics, bare.audio_out, bare.asr, bare.device, bare.notes) == (
        "wer", Path("res") / "seed_tts_audio", None, None, ())
    assert plan({"SEED_TTS_WER_EVAL": "0"}).metrics is None


def test_the_command_line_wins_and_chinese_keeps_paraformer(tmp_path):
    env = {"SEED_TTS_HF_WHISPER_MODEL": "openai/whisper-tiny", "SEED_TTS_WER_SAVE_AUDIO_DIR": str(tmp_path)}
    got = plan(env, metrics="mos", audio_out=Path("kept"), asr="faster-whisper:tiny", wer_flag=True)
    assert (got.metrics, got.audio_out, got.asr) == ("mos,wer", Path("kept"), "faster-whisper:tiny")
    assert any("--audio-out given, which wins" in n for n in got.notes)
    assert any("--eval-asr given, which wins" in n for n in got.notes)
    zh = plan(env, wer_flag=True, locale="zh")
    assert zh.asr is None and any("Paraformer" in n for n in zh.notes)


def test_variables_with_nothing_to_configure_say_so():
    got = plan({"SEED_TTS_EVAL_DEVICE": "cpu", "SEED_TTS_SIM_EVAL": "1", "SEED_TTS_HF_WHISPER_MODEL": "m"})
    assert (got.metrics, got.asr, got.device) == (None, None, "cpu")
    assert got.notes == ("$SEED_TTS_SIM_EVAL, $SEED_TTS_HF_WHISPER_MODEL, $SEED_TTS_EVAL_DEVICE: not used, nothing "
                         "is scored (--eval wer, --seed-tts-wer-eval or $SEED_TTS_WER_EVAL=1 score the kept audio)",)


def test_only_the_ignored_variables_set_are_named():
    assert seed_tts_env_notes({}) == []
    notes = seed_tts_env_notes({"SEED_TTS_HF_WHISPER_MODEL": "x", "SEED_TTS_WAVLM_MODEL": "microsoft/wavlm-base-plus",
                                "SEED_TTS_UTMOS_HF_REPO": " ", "PATH": "/bin"})
    assert notes == ["$SEED_TTS_WAVLM_MODEL is vLLM-Omni's and ignored here: omni eval's SIM model is its own, local "
                     "(docs/eval.md)"]
    assert not set(HONOURED) & set(IGNORED)


def test_every_seed_tts_variable_vllm_omni_lists_is_known_here():
    inventory = pytest.importorskip("vllm_omni.config.environment_variable_inventory",
                                    reason="vLLM-Omni is not installed")
    theirs = {name for name in inventory.ENVIRONMENT_VARIABLE_INVENTORY if name.startswith("SEED_TTS_")}
    assert theirs and theirs <= set(SEED_TTS_VARS), sorted(theirs - set(SEED_TTS_VARS))


@pytest.mark.parametrize("raw", ["1", "true", "YES", "on", "0", "off", "no", "", "maybe"])
def test_sim_on_or_off_as_vllm_omni_reads_it(raw, monkeypatch):
    seed_tts_eval_mod = pytest.importorskip("vllm_omni.benchmarks.data_modules.seed_tts_eval",
                                            reason="vLLM-Omni is not installed")
    monkeypatch.setenv("SEED_TTS_SIM_EVAL", raw)
    theirs = seed_tts_eval_mod._eval_submetric_enabled("SEED_TTS_SIM_EVAL", default=False)
    ours = "sim" in (plan({"SEED_TTS_SIM_EVAL": raw}, wer_flag=True).metrics or "")
    assert ours == theirs


def test_a_bench_run_honours_the_wer_pass_before_any_engine_starts(no_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("SEED_TTS_WER_EVAL", "1")
    monkeypatch.setenv("SEED_TTS_HF_WHISPER_MODEL", str(tmp_path / "no-whisper-here"))
    result = runner.invoke(app, ["bench", str(write_manifest(tmp_path, ["one two"])), "--result-dir", str(tmp_path)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output  # the Whisper it names is located first, and is not there
    assert "$SEED_TTS_WER_EVAL: the WER pass is on" in said and "no-whisper-here" in said


def test_a_bench_run_names_the_ignored_ones_once(token_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("SEED_TTS_UTMOS_EVAL", "1")
    monkeypatch.setenv("SEED_TTS_WER_SAVE_AUDIO_DIR", str(tmp_path / "wavs"))
    result = runner.invoke(app, ["bench", str(write_manifest(tmp_path, ["one two"])), "--result-dir", str(tmp_path)])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert said.count("$SEED_TTS_UTMOS_EVAL is vLLM-Omni's and ignored here: omni bench cannot load UTMOS") == 1
    assert "$SEED_TTS_WER_SAVE_AUDIO_DIR: not used, nothing is scored" in said


def test_omnis_environment_variables_are_in_the_help():
    words = "".join(runner.invoke(app, ["bench", "--help"]).output.split())  # wrapping-proof
    for name in ("OMNI_FAILED_SPEECH_AUDIO_DIR", "OMNI_CACHE_DIR", "OMNI_PROFILES_DIR",
                 "VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S", "SEED_TTS_WER_EVAL"):
        assert name in words
