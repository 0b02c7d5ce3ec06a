"""Hostile audio in eval and as a synth reference: implausible headers refused before resampling,
bounded clip length and ONNX calls, notes on what the scores cannot show, a minimum length for MOS."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.audio import AudioError, load_audio
from omnicli.driver.inputs import InputError, request_from_row
from omnicli.errors import EXIT_SOME_FAILED
from omnicli.evaluation import evaluate
from omnicli.evaluation.clips import MAX_CLIP_SECONDS
from omnicli.evaluation.scorers import ScoreItem, Scorer, score_audio
from omnicli.evaluation.scorers.base import SAMPLE_RATE
from omnicli.manifest import ManifestRow
from tests import needs
from tests.fakes import LengthAsr


def pcm16_wav(path: Path, rate: int, samples: int, *, declared: int | None = None) -> Path:
    """A plain 16-bit mono wav written byte by byte, so its header can say anything."""
    data = (0.2 * np.sin(np.arange(samples) / 3) * 32767).astype("<i2").tobytes()
    size = len(data) if declared is None else declared
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    path.write_bytes(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + fmt + b"data"
                     + struct.pack("<I", size) + data)
    return path


def tone(path: Path, seconds: float, rate: int = 16_000) -> Path:
    n = int(seconds * rate)
    sf.write(path, (0.3 * np.sin(2 * np.pi * 180 * np.arange(n) / rate)).astype(np.float32), rate)
    return path


@pytest.mark.parametrize("rate", [1, 999, 384_001, 1_000_000])
def test_an_implausible_sample_rate_is_refused_from_the_header(tmp_path, rate):
    path = pcm16_wav(tmp_path / "x.wav", rate, 200)
    assert path.stat().st_size == 444
    with pytest.raises(AudioError, match=f"implausible sample rate {rate} Hz"):
        load_audio(path)


def test_a_reference_with_a_1_hz_header_fails_its_row_with_the_reason(tmp_path):
    ref = pcm16_wav(tmp_path / "ref.wav", 1, 200)
    row = ManifestRow(utt="u", text="Hi.", prompt_wav=ref, line_no=3, source=Path("/data/meta.lst"))
    with pytest.raises(InputError) as info:
        request_from_row(row)
    assert str(info.value).startswith("/data/meta.lst:3: reference audio:")
    assert "implausible sample rate 1 Hz" in str(info.value)


class LengthScorer(Scorer):
    """Stands in for a MOS backend: the clip length as its score."""

    metric, backend, keys, min_seconds = "mos", "length", ("utmos",), 0.5

    def score(self, items):
        return [{"utmos": float(len(item.clip))} for item in items]

    def describe(self):
        return {"backend": "length", "model": "-", "comparable_to": "-"}


@pytest.fixture
def hostile_gen(tmp_path) -> tuple[Path, list[ManifestRow]]:
    """gen/: a good clip, 1 Hz and 1 MHz headers, a cut-short wav, a 4 GB data claim, a symlink out, one sample.
    The clips last 9.5 s: one DNSMOS window each (shorter ones are repeated up to 7 windows)."""
    gen = tmp_path / "gen"
    gen.mkdir()
    tone(gen / "good.wav", 9.5)
    pcm16_wav(gen / "one_hz.wav", 1, 200)
    pcm16_wav(gen / "one_mhz.wav", 1_000_000, 200)
    pcm16_wav(gen / "cut_short.wav", 16_000, 152_000, declared=608_000)
    pcm16_wav(gen / "huge_claim.wav", 16_000, 152_000, declared=0xFFFFFFF0)
    tone(tmp_path / "elsewhere.wav", 9.5)
    (gen / "outside.wav").symlink_to(tmp_path / "elsewhere.wav")
    sf.write(gen / "one_sample.wav", np.array([0.5], np.float32), 16_000)
    rows = [ManifestRow(utt=u, text="one") for u in
            ("good", "one_hz", "one_mhz", "cut_short", "huge_claim", "outside", "one_sample")]
    return gen, rows


def test_wer_rows_with_hostile_headers_fail_alone_and_odd_files_get_notes(hostile_gen):
    gen, rows = hostile_gen
    run = evaluate(rows, gen, backend=LengthAsr())
    by = {r.utt: r for r in run.results}
    assert by["good"].status == "ok" and not by["good"].notes
    for utt, rate in (("one_hz", 1), ("one_mhz", 1_000_000)):
        assert by[utt].status == "unreadable" and f"implausible sample rate {rate} Hz" in by[utt].error
    assert (
        by["cut_short"].status == "ok"
        and "declares 608000 bytes of audio but the file holds 304000" in by["cut_short"].notes[0]
    )
    assert by["huge_claim"].status == "ok" and "declares 4294967280 bytes" in by["huge_claim"].notes[0]
    assert (
        by["outside"].status == "ok"
        and "is a symlink to" in by["outside"].notes[0]
        and "outside" in by["outside"].notes[0]
    )
    from omnicli.evaluation import build_wer_summary

    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=None)
    assert set(summary["notes"]) == {"cut_short", "huge_claim", "outside"}


def test_mos_rows_hostile_headers_notes_and_the_minimum_length(hostile_gen):
    gen, rows = hostile_gen
    run = score_audio(rows, gen, [LengthScorer()])
    by = {r.utt: r for r in run.results}
    assert by["good"].values == {"utmos": 9.5 * SAMPLE_RATE}
    assert by["one_hz"].status == "unreadable" and "implausible sample rate 1 Hz" in by["one_hz"].error
    assert by["one_sample"].status == "ok" and not by["one_sample"].values
    assert "clip is 0.000 s long; length scores clips of at least 0.5 s" in by["one_sample"].errors["mos"]
    assert by["cut_short"].values and by["cut_short"].notes and by["outside"].notes and by["huge_claim"].notes


def test_long_clips_are_read_and_scored_on_the_cap_only(tmp_path):
    gen = tmp_path / "gen"
    gen.mkdir()
    tone(gen / "long.wav", MAX_CLIP_SECONDS + 5, rate=8_000)
    rows = [ManifestRow(utt="long", text="one")]
    (result,) = score_audio(rows, gen, [LengthScorer()]).results
    assert result.values == {"utmos": MAX_CLIP_SECONDS * SAMPLE_RATE}
    assert result.audio_s == pytest.approx(MAX_CLIP_SECONDS + 5)
    assert result.notes == [f"scored on the first {MAX_CLIP_SECONDS:g} s of {MAX_CLIP_SECONDS + 5:.1f} s"]
    asr = LengthAsr(truncates=False)  # a backend without Whisper's 30 s window (Paraformer) gets the cap too
    (wer,) = evaluate(rows, gen, backend=asr).results
    assert asr.lengths == [int(MAX_CLIP_SECONDS * SAMPLE_RATE)] and wer.truncated and wer.notes


def test_a_clip_under_the_cap_is_what_the_whole_file_gives(tmp_path):
    from omnicli.audio import load_mono
    from omnicli.evaluation.clips import load_clip

    path = tone(tmp_path / "a.wav", 3.0, rate=44_100)
    assert np.array_equal(load_clip(path, tmp_path).pcm, load_mono(path, SAMPLE_RATE))


@pytest.fixture(scope="module")
def dnsmos():
    needs.module("speechmos", "speechmos (the eval extra) is not installed")
    from omnicli.evaluation.scorers.mos import load_mos

    (scorer,) = load_mos("dnsmos")
    return scorer


class RecordingSession:
    """Wraps an onnxruntime session and records the batch size of every call."""

    def __init__(self, session):
        self.session, self.batches = session, []

    def run(self, outputs, feeds):
        self.batches.append(len(feeds["input_1"]))
        return self.session.run(outputs, feeds)


def test_dnsmos_scores_in_bounded_calls_with_the_figures_of_one_call(dnsmos, monkeypatch):
    from omnicli.evaluation.scorers import mos

    rng = np.random.default_rng(1)
    clips = [(0.2 * np.sin(np.arange(n) / 7) + 0.01 * rng.standard_normal(n)).astype(np.float32)
             for n in (int(SAMPLE_RATE * 11.5), int(SAMPLE_RATE * 9.5))]
    items = [ScoreItem(str(i), c) for i, c in enumerate(clips)]
    monkeypatch.setattr(mos, "WINDOWS_PER_CALL", 10_000)  # every window in one call: the figures to match
    whole = dnsmos.score(items)
    primary, p808 = RecordingSession(dnsmos._primary), RecordingSession(dnsmos._p808)
    monkeypatch.setattr(mos, "WINDOWS_PER_CALL", 2)
    monkeypatch.setattr(dnsmos, "_primary", primary)
    monkeypatch.setattr(dnsmos, "_p808", p808)
    bounded = dnsmos.score(items)
    windows = sum(len(mos.dnsmos_windows(c)) for c in clips)
    assert windows == 3 and primary.batches == p808.batches == [2, 1]
    for a, b in zip(whole, bounded, strict=True):
        assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 2e-4 for k in a)


def test_omni_eval_mos_on_hostile_files_goes_on_and_says_why(hostile_gen, tmp_path, dnsmos):
    from omnicli.cli import app

    gen, rows = hostile_gen
    (tmp_path / "meta.lst").write_text("".join(f"{r.utt}|p||{r.text}\n" for r in rows))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", str(gen), "-m", str(tmp_path / "meta.lst"), "--metrics", "mos",
                                      "--out", str(out), "--device", "cpu"], catch_exceptions=False)
    assert result.exit_code == EXIT_SOME_FAILED, result.output
    said = " ".join(result.output.split())
    assert "implausible sample rate 1 Hz" in said and "at least 0.5 s" in said
    lines = {r["utt"]: r for r in map(json.loads, (out / "eval_results.jsonl").read_text().splitlines())}
    assert lines["good"]["dnsmos_ovrl"] is not None and lines["one_sample"]["dnsmos_ovrl"] is None
    assert "at least 0.5 s" in lines["one_sample"]["mos_error"]
    assert lines["cut_short"]["notes"] and lines["cut_short"]["dnsmos_ovrl"] is not None
    summary = json.loads((out / "eval_summary.json").read_text())
    assert set(summary["notes"]) == {"cut_short", "huge_claim", "outside"}
