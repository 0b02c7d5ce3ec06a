"""Issue 32 item 2: vLLM-Omni's `seed-tts-text` (CustomVoice) and `seed-tts-design` (VoiceDesign)
datasets, with the row shapes its loaders read, through `omni bench` (a fake engine records the requests:
tests/test_dropin_vllm_readers.py)."""

from __future__ import annotations

import json

import numpy as np
import soundfile as sf
from typer.testing import CliRunner

from omnicli.benchmark.seed_tts_sets import read_seed_tts_set
from omnicli.cli import app

runner = CliRunner()


def seed_tts_folder(tmp_path, lines, locale="en", wavs=()):
    folder = tmp_path / "seed-tts-eval" / locale
    (folder / "prompt-wavs").mkdir(parents=True)
    for name in wavs:
        sf.write(folder / "prompt-wavs" / name, np.zeros(1600, np.float32), 16000)
    (folder / "meta.lst").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder.parent


def test_seed_tts_text_sends_the_rows_without_their_reference_and_with_the_named_voice(token_engine, tmp_path):
    root = seed_tts_folder(tmp_path, ["u1|ref one|prompt-wavs/u1.wav|hello there", "u2|ref two|prompt-wavs/u2.wav|bye"],
                           wavs=["u1.wav", "u2.wav"])
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-text", "--dataset-path", str(root),
                                 "--extra-body", json.dumps({"voice": "Vivian"}), "--disable-shuffle",
                                 "--result-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    sent = {r.text: r for r in token_engine.requests}
    assert set(sent) == {"hello there", "bye"}
    assert all(r.ref_audio is None and r.ref_text == "" and r.voice == "Vivian" for r in sent.values())


def test_seed_tts_design_sends_the_voice_description_as_instruct(token_engine, tmp_path):
    root = seed_tts_folder(tmp_path, [
        "d1|||Good morning.|A warm, low female voice, calm.",
        "d2|ref|missing.wav|Good night.|An excited young man.",
    ], locale="zh")
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-design", "--dataset-path", str(root),
                                 "--seed-tts-locale", "zh", "--result-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    sent = {r.text: r for r in token_engine.requests}
    assert sent["Good morning."].instruct == "A warm, low female voice, calm."
    assert sent["Good night."].instruct == "An excited young man." and sent["Good night."].ref_audio is None
    assert {r.language for r in sent.values()} == {"Chinese"}  # as vLLM-Omni's design requests name it


def test_a_design_row_without_a_description_is_named_with_its_line(tmp_path):
    root = seed_tts_folder(tmp_path, ["d1|||Good morning.|", "d2|||Hi.|a voice", "bad line"])
    manifest = read_seed_tts_set(root / "en" / "meta.lst", "seed-tts-design")
    assert [r.utt for r in manifest.rows] == ["d2"]
    assert [str(e).rsplit(":", 2)[1:] for e in manifest.errors] == [
        ["1", " empty voice_description"], ["3", " expected utt|ref_text|wav|text|voice_description (seed-tts-design), "
                                                 "found 1 field(s)"]]
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-design", "--dataset-path", str(root)])
    assert result.exit_code == 2 and "empty voice_description" in result.output
