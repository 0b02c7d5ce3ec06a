"""A JSONL row's `instruct` (a voice described in words, Qwen3-TTS VoiceDesign): parsed and checked with
the row, carried into the request, and part of the input digest only when present."""

from __future__ import annotations

import json
from pathlib import Path

from omnicli.driver.inputs import request_from_row
from omnicli.manifest import MAX_INSTRUCT_CHARS, ManifestRow, read_manifest
from omnicli.synth.plan import input_digest


def jsonl(folder: Path, *rows: dict) -> Path:
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_instruct_is_read_stripped_optional_and_reaches_the_request(tmp_path):
    m = read_manifest(
        jsonl(
            tmp_path,
            {"utt": "a", "text": "A.", "instruct": " A calm, low voice. "},
            {"utt": "b", "text": "B."},
            {"utt": "c", "text": "C.", "instruct": None},
        )
    )
    assert not m.errors
    assert [(r.utt, r.instruct) for r in m.rows] == [("a", "A calm, low voice."), ("b", ""), ("c", "")]
    assert [request_from_row(r).instruct for r in m.rows] == ["A calm, low voice.", None, None]


def test_a_bad_instruct_skips_that_row_only(tmp_path):
    path = jsonl(
        tmp_path,
        {"utt": "a", "text": "A.", "instruct": ["no"]},
        {"utt": "b", "text": "B.", "instruct": "x" * (MAX_INSTRUCT_CHARS + 1)},
        {"utt": "c", "text": "C.", "instruct": "Bright."},
    )
    m = read_manifest(path)
    assert [r.utt for r in m.rows] == ["c"]
    assert [(e.line_no, e.reason) for e in m.errors] == [
        (1, "key 'instruct' must be a string, got list"),
        (2, f"instruct is {MAX_INSTRUCT_CHARS + 1} characters long (limit {MAX_INSTRUCT_CHARS})"),
    ]


def test_instruct_changes_the_digest_only_when_present():
    plain = ManifestRow(utt="a", text="Hello.")
    assert input_digest(plain) == input_digest(ManifestRow(utt="a", text="Hello.", instruct=""))
    assert input_digest(ManifestRow(utt="a", text="Hello.", instruct="Calm.")) not in (
        input_digest(plain),
        input_digest(ManifestRow(utt="a", text="Hello.", instruct="Loud.")),
    )
