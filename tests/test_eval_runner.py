"""The eval runner on its own: statuses, batching, failures and retention (a scripted ASR stands in)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import soxr

from omnicli.evaluation import build_wer_summary, evaluate, write_results
from omnicli.evaluation.asr.base import AsrBackend
from omnicli.evaluation.results import FAILED_STATUSES, RESULTS_JSONL, RESULTS_TSV, SEED_WER_FILE, SUMMARY_JSON
from omnicli.evaluation.wer_run import load_asr_input
from omnicli.manifest import ManifestRow
from omnicli.retention import Retainer


class ScriptedAsr(AsrBackend):
    """Answers from a table keyed by clip length; raises on clips marked as poison."""

    backend = "scripted"

    def __init__(self, answers: dict[int, str], poison_len: int | None = None):
        super().__init__(model="scripted", language="en", device="cpu")
        self.answers, self.poison_len, self.batches = answers, poison_len, []

    def transcribe(self, clips):
        self.batches.append([len(c) for c in clips])
        if any(len(c) == self.poison_len for c in clips):
            raise RuntimeError("poisoned clip")
        return [self.answers[len(c)] for c in clips]

    def decoding_settings(self):
        return {"search": "scripted"}


def _wav(path, seconds, sr=16_000, channels=1, amplitude=0.2):
    n = int(seconds * sr)
    pcm = amplitude * np.sin(2 * np.pi * 200 * np.arange(n) / sr)
    if channels > 1:
        pcm = np.stack([pcm] * channels, axis=1)
    sf.write(path, pcm.astype(np.float32), sr)


def test_statuses_and_summary(tmp_path):
    gen = tmp_path / "gen"
    gen.mkdir()
    _wav(gen / "good.wav", 1.0)
    _wav(gen / "bad.wav", 2.0)
    _wav(gen / "silent_asr.wav", 3.0)
    (gen / "garbage.wav").write_bytes(b"RIFF not really a wav at all")
    (gen / "zero.wav").write_bytes(b"")
    sf.write(gen / "noframes.wav", np.zeros(0, dtype=np.float32), 16_000)
    _wav(gen / "emptyref.wav", 1.0)
    rows = [
        ManifestRow("good", "one two three four"),
        ManifestRow("bad", "alpha beta gamma delta"),
        ManifestRow("silent_asr", "some words here"),
        ManifestRow("absent", "never generated"),
        ManifestRow("garbage", "x"),
        ManifestRow("zero", "x"),
        ManifestRow("noframes", "x"),
        ManifestRow("emptyref", "?!"),
    ]
    asr = ScriptedAsr({16_000: "One, two, three four.", 32_000: "nothing alike at all", 48_000: "..."})
    retainer = Retainer(tmp_path / "kept")
    seen = []
    run = evaluate(rows, gen, backend=asr, batch_size=2, retainer=retainer,
                   retention_meta={"profile_digest": "d1"}, on_result=seen.append)
    by = {r.utt: r for r in run.results}
    assert [r.utt for r in run.results] == [row.utt for row in rows]  # manifest order
    assert len(seen) == len(rows)
    assert by["good"].status == "ok" and by["good"].wer == 0.0
    assert by["bad"].status == "ok" and by["bad"].wer == 1.0 and by["bad"].reasons == ["asr_mismatch"]
    assert by["silent_asr"].status == "asr_empty" and by["silent_asr"].reasons == ["asr_empty"]
    assert by["absent"].status == "missing"
    assert by["garbage"].status == "unreadable"
    assert by["zero"].status == "empty_audio" and by["noframes"].status == "empty_audio"
    assert by["emptyref"].status == "empty_reference"
    assert asr.batches == [[16_000, 32_000], [48_000]]  # batched; failures never reach ASR

    summary = build_wer_summary(
        run, lang="en", threshold=0.5, asr=asr.describe(), profile_digest="d1", retainer=retainer
    )
    # The empty transcript is scored as WER 1.0 (seed-tts-eval's rule), not failed.
    assert by["silent_asr"].wer == 1.0 and by["silent_asr"].hyp == "..."
    assert summary["num_scored"] == 3 and summary["num_missing"] == 1 and summary["num_failed"] == 4
    assert summary["num_empty_transcripts"] == 1
    assert summary["missing"] == ["absent"]
    assert {f["utt"] for f in summary["failed"]} == {"garbage", "zero", "noframes", "emptyref"}
    assert summary["seed_wer_mean"] == round((0 + 1 + 1) / 3 * 100, 3) and summary["share_wer_above_50"] == round(
        2 / 3 * 100, 3
    )
    assert summary["wer_mean_failed_as_100"] == round((0 + 1 + 1 + 4) / 7 * 100, 3)
    assert summary["profile_digest"] == "d1" and summary["asr"]["backend"] == "scripted"
    assert summary["num_retained"] == 2

    # retained: the exact 16 kHz ASR input, with the transcript and the reference
    kept = {json.loads(p.read_text())["utt"]: p for p in (tmp_path / "kept").glob("*.json")}
    assert set(kept) == {"bad", "silent_asr"}
    meta = json.loads(kept["bad"].read_text())
    assert meta["reasons"] == ["asr_mismatch"] and meta["transcript"] == "nothing alike at all"
    assert meta["reference"] == "alpha beta gamma delta" and meta["profile_digest"] == "d1"
    audio, sr = sf.read(kept["bad"].with_suffix(".wav"), dtype="float32")
    clip = load_asr_input(gen / "bad.wav", truncate=True).pcm
    assert sr == 16_000 and np.array_equal(audio, clip)

    paths = write_results(tmp_path / "out", run.results, summary)
    assert {p.name for p in paths.values()} == {RESULTS_TSV, RESULTS_JSONL, SUMMARY_JSON, SEED_WER_FILE}
    lines = paths["tsv"].read_text().splitlines()
    assert lines[0].split("\t")[:8] == ["utt", "wer", "ref", "hyp", "ins", "del", "sub", "status"]
    assert len(lines) == 1 + len(rows)
    rows_json = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert rows_json[1]["utt"] == "bad" and rows_json[1]["del"] == 0.0 and rows_json[1]["sub"] == 1.0


def test_failed_batch_is_retried_clip_by_clip(tmp_path):
    for name, seconds in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        _wav(tmp_path / f"{name}.wav", seconds)
    rows = [ManifestRow("a", "x y"), ManifestRow("b", "x y"), ManifestRow("c", "x y")]
    asr = ScriptedAsr({16_000: "x y", 48_000: "x y"}, poison_len=32_000)
    run = evaluate(rows, tmp_path, backend=asr, batch_size=3)
    assert [r.status for r in run.results] == ["ok", "asr_error", "ok"]
    assert "poisoned clip" in run.results[1].error
    assert "asr_error" in FAILED_STATUSES


def test_any_rate_and_channels_become_16k_mono(tmp_path):
    _wav(tmp_path / "st.wav", 1.0, sr=44_100, channels=2)
    loaded = load_asr_input(tmp_path / "st.wav", truncate=True)
    clip, duration, truncated = loaded.pcm, loaded.duration_s, loaded.truncated
    assert clip.ndim == 1 and clip.dtype == np.float32
    assert abs(clip.shape[0] - 16_000) <= 1 and duration == pytest.approx(1.0) and not truncated
    mono = soxr.resample(sf.read(tmp_path / "st.wav", dtype="float32")[0].mean(axis=1), 44_100, 16_000, quality="HQ")
    assert np.allclose(clip, mono, atol=1e-6)


def test_long_clip_truncated_and_flagged(tmp_path):
    _wav(tmp_path / "long.wav", 31.0, sr=8_000)
    asr = ScriptedAsr({480_000: "x"})
    run = evaluate([ManifestRow("long", "x")], tmp_path, backend=asr)
    result = run.results[0]
    assert result.over_30s and result.truncated and result.audio_s == pytest.approx(31.0)
    assert asr.batches == [[480_000]]
    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=None)
    assert summary["num_over_30s"] == 1 and summary["num_truncated"] == 1


def test_transcripts_mode_rescoring_and_retention_from_gen_wav(tmp_path):
    _wav(tmp_path / "a.wav", 1.0, sr=22_050)
    rows = [ManifestRow("a", "hello world"), ManifestRow("b", "second one"), ManifestRow("c", "third")]
    retainer = Retainer(tmp_path / "kept")
    run = evaluate(rows, tmp_path, transcripts={"a": "goodbye moon", "c": "third"}, retainer=retainer)
    assert [r.status for r in run.results] == ["ok", "missing", "ok"]
    assert run.results[0].retained and run.results[0].reasons == ["asr_mismatch"]
    assert run.results[1].error == "no transcript in the transcripts file"
    with pytest.raises(ValueError):
        evaluate(rows, tmp_path)
