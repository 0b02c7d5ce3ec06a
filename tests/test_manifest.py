"""Manifest parsing: every kind of bad row is reported with file, line and reason; good rows go on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.manifest import MAX_UTT_BYTES, ManifestError, read_manifest
from tests.fakes import write_manifest


@pytest.fixture
def folder(prompt_folder: Path) -> Path:
    return prompt_folder


def write_lst(folder: Path, *lines: str | bytes, name: str = "meta.lst") -> Path:
    return write_manifest(folder, extra=lines, name=name)


GOOD = "good|ref text|prompts/p.wav|Hello there."


def only_error(manifest, line_no: int) -> str:
    """The single error on `line_no`, checked to name the file and line in its text."""
    errors = [e for e in manifest.errors if e.line_no == line_no]
    assert len(errors) == 1, manifest.errors
    text = str(errors[0])
    assert text.startswith(f"{manifest.path}:{line_no}: ")
    return errors[0].reason


def test_good_rows_parse_with_resolved_paths(folder):
    m = read_manifest(
        write_lst(folder, "# comment", "", GOOD, "g2||prompts/p.wav|Second.|prompts/gt.wav", "g3|||No reference.")
    )
    assert [r.utt for r in m.rows] == ["good", "g2", "g3"] and not m.errors
    assert m.rows[0].prompt_wav == (folder / "prompts" / "p.wav").resolve()
    assert m.rows[0].line_no == 3 and m.rows[0].where == f"{m.path}:3"
    assert m.rows[1].gt_wav == (folder / "prompts" / "gt.wav").resolve()  # need not exist
    assert m.rows[2].prompt_wav is None


def test_missing_fields(folder):
    m = read_manifest(write_lst(folder, "only|three|fields", GOOD))
    assert "found 3 field(s)" in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_extra_separators(folder):
    m = read_manifest(write_lst(folder, "x|a|prompts/p.wav|one|two|three", GOOD))
    assert "found 6 fields" in only_error(m, 1) and "'|' inside the text" in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_pipe_in_text_is_not_mistaken_for_gt_wav(folder):
    m = read_manifest(write_lst(folder, "x|a|prompts/p.wav|Cats|dogs", GOOD))
    assert "not an audio file name" in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_non_utf8_line(folder):
    m = read_manifest(write_lst(folder, b"bad|a|prompts/p.wav|caf\xe9", GOOD))
    assert "not valid UTF-8" in only_error(m, 1) and "0xe9" in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_bom_and_crlf_are_accepted(folder):
    path = folder / "meta.lst"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\r\n" + b"g2|||Two.\r\n")
    m = read_manifest(path)
    assert [r.utt for r in m.rows] == ["good", "g2"] and m.rows[1].text == "Two."


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_text(folder, text):
    m = read_manifest(write_lst(folder, f"e|a|prompts/p.wav|{text}", GOOD))
    assert only_error(m, 1) == "empty text"
    assert [r.utt for r in m.rows] == ["good"]


def test_duplicate_ids_keep_the_first(folder):
    m = read_manifest(write_lst(folder, GOOD, "good|||Again."))
    assert "duplicate utterance id 'good' (first on line 1)" in only_error(m, 2)
    assert len(m.rows) == 1 and m.rows[0].text == "Hello there."


def test_duplicate_of_a_bad_row_is_still_a_duplicate(folder):
    m = read_manifest(write_lst(folder, "d|a|prompts/missing.wav|One.", "d|||Two."))
    assert "not found" in only_error(m, 1)
    assert "duplicate" in only_error(m, 2)
    assert m.rows == []


def test_missing_reference(folder):
    m = read_manifest(write_lst(folder, "m|a|prompts/nope.wav|Text.", GOOD))
    assert "reference audio not found" in only_error(m, 1) and "nope.wav" in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_reference_that_is_a_directory(folder):
    m = read_manifest(write_lst(folder, "m|a|prompts|Text.", GOOD))
    assert "is a directory" in only_error(m, 1)


def test_absolute_and_escaping_paths_need_permission(folder, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "o.wav"
    sf.write(outside, np.zeros(160, np.float32), 16000)
    rel_escape = os.path.relpath(outside, folder)
    assert rel_escape.startswith("..")
    lines = [f"abs|a|{outside}|Text.", f"dots|a|{rel_escape}|Text.", "gt|a|prompts/p.wav|Text.|../x.wav", GOOD]
    strict = read_manifest(write_lst(folder, *lines))
    assert "absolute reference audio path" in only_error(strict, 1)
    assert "escapes the manifest folder" in only_error(strict, 2)
    assert "gt_wav path '../x.wav' escapes" in only_error(strict, 3)
    assert [r.utt for r in strict.rows] == ["good"]
    allowed = read_manifest(write_lst(folder, *lines), allow_outside_paths=True)
    assert not allowed.errors
    assert allowed.rows[0].prompt_wav == outside.resolve() and allowed.rows[1].prompt_wav == outside.resolve()


def test_symlink_pointing_outside_counts_as_outside(folder, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "o.wav"
    sf.write(outside, np.zeros(160, np.float32), 16000)
    (folder / "prompts" / "link.wav").symlink_to(outside)
    m = read_manifest(write_lst(folder, "l|a|prompts/link.wav|Text."))
    assert "escapes the manifest folder" in only_error(m, 1)


@pytest.mark.parametrize(
    "utt, why",
    [
        ("a/b", "not allowed in a file name"),
        ("..", "starts with '.'"),
        ("../x", "starts with '.'"),
        (".hidden", "starts with '.'"),
        ("tab\there", "not allowed in a file name"),
        ("x" * (MAX_UTT_BYTES + 1), "bytes long"),
        ("", "empty utterance id"),
    ],
)
def test_unsafe_utterance_ids(folder, utt, why):
    m = read_manifest(write_lst(folder, f"{utt}|a|prompts/p.wav|Text.", GOOD))
    assert why in only_error(m, 1)
    assert [r.utt for r in m.rows] == ["good"]


def test_nul_in_utterance_id(folder):
    m = read_manifest(write_lst(folder, b"a\x00b|a|prompts/p.wav|Text.", GOOD))
    assert "not allowed in a file name" in only_error(m, 1)


def test_longest_allowed_id_and_unicode_ids_are_fine(folder):
    m = read_manifest(write_lst(folder, f"{'x' * MAX_UTT_BYTES}|||Text.", "日本語_01|||Text."))
    assert not m.errors and len(m.rows) == 2


def test_jsonl_rows_and_errors(folder):
    path = folder / "m.jsonl"
    lines = [
        json.dumps({"utt": "j1", "text": "Hi.", "ref_audio": "prompts/p.wav", "ref_text": "ref"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"utt": "j2"}),
        json.dumps({"utt": 7, "text": "Number id."}),
        json.dumps({"utt": "j3", "text": "Other keys.", "prompt_wav": "prompts/p.wav", "prompt_text": "ref"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    m = read_manifest(path)
    assert [r.utt for r in m.rows] == ["j1", "j3"]
    assert m.rows[0].prompt_text == "ref" and m.rows[1].prompt_wav == (folder / "prompts" / "p.wav").resolve()
    assert "invalid JSON" in only_error(m, 2)
    assert "expected a JSON object" in only_error(m, 3)
    assert "missing required key 'text'" in only_error(m, 4)
    assert "key 'utt' must be a string, got int" in only_error(m, 5)


def test_unreadable_manifest_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="manifest not found"):
        read_manifest(tmp_path / "nope.lst")
    with pytest.raises(ManifestError, match="not a file"):
        read_manifest(tmp_path)
