"""Failed-audio retention: each reason judged on synthetic PCM, files named by content, never raising."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import soundfile as sf

from omnicli.profile.schema import RetentionConfig
from omnicli.retention import ENV_VAR, Retainer, judge_audio

SR = 24_000


def tone(seconds: float, amplitude: float, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_healthy_audio_has_no_reason():
    assert judge_audio(tone(1.0, 0.3), SR, text="hello there", finish_reason="stop") == []


def test_empty():
    assert judge_audio(np.zeros(0, dtype=np.float32), SR) == ["empty"]
    assert judge_audio(None, SR) == ["empty"]


def test_near_silent_uses_threshold():
    quiet = tone(1.0, 1e-4)  # about -83 dBFS
    assert judge_audio(quiet, SR) == ["near_silent"]
    assert judge_audio(np.zeros(SR, dtype=np.float32), SR) == ["near_silent"]
    medium = tone(1.0, 0.01)  # about -43 dBFS: fine at -60, silent at -30
    assert judge_audio(medium, SR) == []
    assert judge_audio(medium, SR, thresholds=RetentionConfig(near_silent_dbfs=-30.0)) == ["near_silent"]


def test_hit_cap():
    assert judge_audio(tone(1.0, 0.3), SR, finish_reason="length") == ["hit_cap"]
    assert judge_audio(tone(1.0, 0.3), SR, finish_reason="stop") == []


def test_too_long_relative_to_text():
    # "hi": limit max(10 s floor, 0.5 s/char * 2) = 10 s
    assert judge_audio(tone(11.0, 0.3), SR, text="hi") == ["too_long"]
    assert judge_audio(tone(9.0, 0.3), SR, text="hi") == []
    # 40 chars: limit 20 s
    assert judge_audio(tone(15.0, 0.3), SR, text="x" * 40) == []
    assert judge_audio(tone(21.0, 0.3), SR, text="x" * 40) == ["too_long"]
    assert judge_audio(tone(21.0, 0.3), SR) == []  # no text: not judged


def test_clipped_share():
    audio = tone(1.0, 0.5)
    audio[: int(0.05 * SR)] = 1.0  # 5 % at full scale
    assert judge_audio(audio, SR) == ["clipped"]
    audio = tone(1.0, 0.5)
    audio[: int(0.005 * SR)] = -1.0  # 0.5 %: under the 1 % default
    assert judge_audio(audio, SR) == []


def test_error_keeps_partial_audio_reasons():
    assert judge_audio(tone(0.5, 0.3), SR, error="engine died") == ["error"]
    assert judge_audio(np.zeros(0, dtype=np.float32), SR, error=RuntimeError("x")) == ["error", "empty"]


def test_reasons_accumulate_in_documented_order():
    audio = tone(12.0, 0.5)
    audio[: SR] = 1.0
    assert judge_audio(audio, SR, text="hi", finish_reason="length", error="boom") == [
        "error",
        "hit_cap",
        "too_long",
        "clipped",
    ]


def test_thresholds_come_from_the_profile_section():
    config = RetentionConfig(near_silent_dbfs=-20.0, clipped_share=0.5, too_long_s_per_char=0.1, too_long_min_s=1.0)
    assert config.too_long_limit_s("ab") == 1.0 and config.too_long_limit_s("x" * 30) == pytest.approx(3.0)
    assert judge_audio(tone(2.0, 0.05), SR, text="ab", thresholds=config) == ["near_silent", "too_long"]
    assert judge_audio(tone(2.0, 0.05), SR, text="ab") == []  # the schema's defaults


def test_keep_writes_wav_and_json_named_by_sha(tmp_path):
    retainer = Retainer(tmp_path / "kept")
    audio = tone(0.5, 0.3)
    path = retainer.keep(audio, SR, ["near_silent"], {"utt": "u1", "text": "hello", "profile_digest": "abc"})
    digest = hashlib.sha256(audio.astype("<f4").tobytes()).hexdigest()
    assert path == tmp_path / "kept" / f"failed_speech_{digest[:16]}.wav"
    back, sr = sf.read(path, dtype="float32")
    assert sr == SR and np.array_equal(back, audio)  # exactly the judged samples
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["utt"] == "u1" and meta["text"] == "hello" and meta["profile_digest"] == "abc"
    assert meta["reasons"] == ["near_silent"]
    assert meta["sample_rate"] == SR and meta["duration_s"] == pytest.approx(0.5)
    assert meta["audio_sha256"] == digest and "created_at" in meta
    assert retainer.kept == 1 and retainer.errors == 0


def test_keep_same_audio_twice_merges(tmp_path):
    retainer = Retainer(tmp_path)
    audio = np.zeros(0, dtype=np.float32)
    first = retainer.keep(audio, SR, ["empty"], {"utt": "a"})
    second = retainer.keep(audio, SR, ["error", "empty"], {"utt": "b", "error": "boom"})
    assert first == second
    assert len(list(tmp_path.glob("failed_speech_*.wav"))) == 1
    meta = json.loads(first.with_suffix(".json").read_text())
    assert [o["utt"] for o in meta["occurrences"]] == ["a", "b"]
    assert meta["reasons"] == ["empty", "error"]
    assert meta["utt"] == "b" and meta["error"] == "boom"


def test_keep_without_reasons_writes_nothing(tmp_path):
    retainer = Retainer(tmp_path / "kept")
    assert retainer.keep(tone(0.1, 0.3), SR, [], {"utt": "ok"}) is None
    assert not (tmp_path / "kept").exists()


def test_io_error_is_reported_not_raised(tmp_path, caplog):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the folder should be")
    retainer = Retainer(blocker / "kept")
    with caplog.at_level("WARNING"):
        assert retainer.keep(tone(0.1, 0.3), SR, ["clipped"], {"utt": "x"}) is None
    assert retainer.errors == 1 and retainer.kept == 0
    assert "could not retain" in retainer.error_messages[0]
    assert "could not retain" in caplog.text


def test_from_option_and_env_fallback(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert Retainer.from_option(None) is None
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert Retainer.from_option(None).directory == tmp_path / "env"
    assert Retainer.from_option(tmp_path / "cli").directory == tmp_path / "cli"  # the option wins
