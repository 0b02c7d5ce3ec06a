"""Drop-in with seed-tts-eval: its score file, its meta layouts, its empty-transcript rule, zh without Paraformer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import soundfile as sf

from omnicli.evaluation import build_wer_summary, default_spec, evaluate, write_results
from omnicli.evaluation.asr import AsrSetupError
from omnicli.evaluation.asr.base import AsrBackend
from omnicli.evaluation.results import SEED_WER_FILE
from omnicli.manifest import read_manifest


def read_like_average_wer(path):
    """A reader written from seed-tts-eval's published average_wer.py behaviour:
    every line splits (after strip) on tabs into exactly seven fields
    `wav, wer, ref, hyp, ins, del, sub`; WER = round(mean(wer) * 100, 3).
    It would crash on any other line, so the header and the trailing `WER:`
    line it writes itself are not part of its input: we drop them before reading."""
    wers, ins, dels, subs = [], [], [], []
    for line in open(path, encoding="utf-8").readlines()[1:]:
        if line.startswith("WER: "):
            continue
        wav_path, wer, text_ref, text_res, inse, dele, sub = line.strip().split("\t")
        wers.append(float(wer)), ins.append(float(inse)), dels.append(float(dele)), subs.append(float(sub))
    return {"wer": round(np.mean(wers) * 100, 3), "ins": round(np.mean(ins) * 100, 3),
            "del": round(np.mean(dels) * 100, 3), "sub": round(np.mean(subs) * 100, 3), "n": len(wers)}


class TableAsr(AsrBackend):
    backend = "table"

    def __init__(self, answers):
        super().__init__(model="table", language="en", device="cpu")
        self.answers = answers

    def transcribe(self, clips):
        return [self.answers[len(c)] for c in clips]

    def decoding_settings(self):
        return {}


def _tone(path, seconds):
    n = int(seconds * 16_000)
    sf.write(path, (0.2 * np.sin(np.arange(n) / 5)).astype(np.float32), 16_000)


def test_seed_wer_file_reads_unchanged_and_matches_summary(tmp_path):
    gen = tmp_path / "gen"
    gen.mkdir()
    for name, seconds in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        _tone(gen / f"{name}.wav", seconds)
    meta = tmp_path / "meta.lst"
    # seed-tts-eval's 2-field and 3-field layouts beside the usual 4-field one; "c.wav" names utt c.
    meta.write_text("a|One, two three four.\nb|alpha beta gamma|prompts/x.wav\nc.wav|some words here|p.wav\n"
                    "d|p|x.wav|never generated\n", encoding="utf-8")
    parsed = read_manifest(meta, allow_outside_paths=True, check_audio=False, short_layouts=True)
    assert not parsed.errors and [r.utt for r in parsed.rows] == ["a", "b", "c", "d"]
    assert parsed.rows[1].text == "alpha beta gamma" and parsed.rows[1].prompt_text == ""

    asr = TableAsr({16_000: "one two three for", 32_000: "alpha beta gamma delta", 48_000: "  "})
    run = evaluate(parsed.rows, gen, backend=asr)
    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=asr.describe(), gen_dir=gen)
    paths = write_results(tmp_path / "out", run.results, summary)
    assert paths["seed_wer"].name == SEED_WER_FILE
    assert summary["num_empty_transcripts"] == 1 and summary["num_missing"] == 1 and summary["num_failed"] == 0

    seed = read_like_average_wer(paths["seed_wer"])
    assert seed["n"] == 3  # the missing wav is skipped, as run_wer.py does; the empty transcript is kept
    assert seed["wer"] == summary["seed_wer_mean"] == round((0.25 + 1 / 3 + 1.0) / 3 * 100, 3)
    assert (seed["ins"], seed["del"], seed["sub"]) == (summary["ins"], summary["del"], summary["sub"])
    lines = paths["seed_wer"].read_text(encoding="utf-8").splitlines()
    assert lines[-1] == f"WER: {summary['seed_wer_mean']}%"
    assert lines[0].split("\t")[:3] == ["utt", "wav_res", "res_wer"]  # average_wer.py's header
    first = lines[1].split("\t")
    assert first[0] == str(gen / "a.wav") and first[2] == "One, two three four." and first[3] == "one two three for"
    assert math.isclose(float(first[1]), 0.25)


def test_short_layouts_only_when_asked(tmp_path):
    meta = tmp_path / "meta.lst"
    meta.write_text("a|hello there\n", encoding="utf-8")
    parsed = read_manifest(meta, check_audio=False)
    assert not parsed.rows and "found 2 field(s)" in parsed.errors[0].reason


def test_chinese_without_paraformer_is_a_clear_setup_error(monkeypatch):
    from omnicli.evaluation.asr import paraformer

    monkeypatch.setattr(paraformer, "funasr_available", lambda: False)
    with pytest.raises(AsrSetupError, match="funasr is not installed.*--asr openai-whisper:large-v3"):
        default_spec("zh")
    assert str(default_spec("en")) == "openai-whisper:large-v3"
