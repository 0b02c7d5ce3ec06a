"""A JSONL row's `voice`: parsed and checked with the row, carried into the request, and part of
the input digest only when present (older result folders are not redone)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from omnicli.driver.inputs import request_from_row
from omnicli.manifest import MAX_VOICE_CHARS, ManifestRow, read_manifest
from omnicli.synth.plan import RESULTS, input_digest, plan_run


def jsonl(folder: Path, *rows: dict) -> Path:
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_voice_is_read_stripped_and_optional(tmp_path):
    m = read_manifest(jsonl(tmp_path, {"utt": "a", "text": "A.", "voice": " leah "}, {"utt": "b", "text": "B."},
                            {"utt": "c", "text": "C.", "voice": None}, {"utt": "d", "text": "D.", "voice": ""}))
    assert not m.errors
    assert [(r.utt, r.voice) for r in m.rows] == [("a", "leah"), ("b", ""), ("c", ""), ("d", "")]


def test_a_bad_voice_skips_that_row_only_naming_file_line_and_reason(tmp_path):
    path = jsonl(
        tmp_path,
        {"utt": "a", "text": "A.", "voice": 3},
        {"utt": "b", "text": "B.", "voice": "x" * (MAX_VOICE_CHARS + 1)},
        {"utt": "c", "text": "C.", "voice": "ta\nra"},
        {"utt": "d", "text": "D.", "voice": "zoe"},
    )
    m = read_manifest(path)
    assert [r.utt for r in m.rows] == ["d"]
    assert [(e.line_no, e.reason, e.utt) for e in m.errors] == [
        (1, "key 'voice' must be a string, got int", None),
        (2, f"voice is {MAX_VOICE_CHARS + 1} characters long (limit {MAX_VOICE_CHARS})", "b"),
        (3, "voice 'ta\\nra' contains control characters: ['\\n']", "c"),
    ]
    assert str(m.errors[1]) == f"{path}:2: voice is {MAX_VOICE_CHARS + 1} characters long (limit {MAX_VOICE_CHARS})"


def test_seed_tts_rows_have_no_voice(tmp_path):
    (tmp_path / "meta.lst").write_text("u|ref words||Hello.\n")
    assert [r.voice for r in read_manifest(tmp_path / "meta.lst").rows] == [""]


def test_the_request_carries_the_rows_voice(tmp_path):
    m = read_manifest(jsonl(tmp_path, {"utt": "a", "text": "A.", "voice": "leo"}, {"utt": "b", "text": "B."}))
    assert [request_from_row(r).voice for r in m.rows] == ["leo", None]


def test_digest_of_a_row_without_voice_is_unchanged_and_a_voice_changes_it():
    # Digests written before rows had voices (computed with the previous version): still the same.
    assert input_digest(ManifestRow(utt="u", text="Hello there.", prompt_text="Ref words.")) == "9cfd6dbae1c93634"
    assert input_digest(ManifestRow(utt="u", text="Hello there.")) == "9b9eded173e30082"
    plain = ManifestRow(utt="u", text="Hello there.")
    digests = {input_digest(plain), input_digest(ManifestRow(utt="u", text="Hello there.", voice="leah")),
               input_digest(ManifestRow(utt="u", text="Hello there.", voice="zac"))}
    assert len(digests) == 3


def test_resume_redoes_a_row_whose_voice_changed(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    first = read_manifest(jsonl(tmp_path, {"utt": "a", "text": "A.", "voice": "leah"}, {"utt": "b", "text": "B."}))
    lines = []
    for row in first.rows:
        sf.write(out / f"{row.utt}.wav", np.zeros(2400, np.float32), 24000, subtype="PCM_16")
        lines.append(
            {
                "utt": row.utt,
                "status": "ok",
                "line": row.line_no,
                "wav": f"{row.utt}.wav",
                "audio_seconds": 0.1,
                "input_digest": input_digest(row),
            }
        )
    (out / RESULTS).write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert plan_run(first, out).done == ["a", "b"]
    edited = read_manifest(jsonl(tmp_path, {"utt": "a", "text": "A.", "voice": "zac"}, {"utt": "b", "text": "B."}))
    plan = plan_run(edited, out)
    assert plan.changed == ["a"] and [r.utt for r in plan.todo] == ["a"] and plan.done == ["b"]
