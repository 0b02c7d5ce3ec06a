"""Manifest rules at their edges (found by mutation testing): JSONL key aliases and nulls,
which characters an utterance id may hold, exact error texts and the utterance each names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnicli.manifest import read_manifest, resolve_audio_path
from tests.fakes import write_manifest


@pytest.fixture
def folder(prompt_folder: Path) -> Path:
    return prompt_folder


def lst(folder: Path, *lines: str | bytes, name: str = "meta.lst") -> Path:
    return write_manifest(folder, extra=lines, name=name)


def test_jsonl_aliases_nulls_and_gt_wav(folder):
    rows = [
        {"utt": "a", "text": "A.", "ref_text": "r", "prompt_text": "ignored", "ref_audio": "prompts/p.wav"},
        {"utt": "b", "text": "B.", "prompt_text": "p", "prompt_wav": "prompts/p.wav", "gt_wav": "gt/b.wav"},
        {"utt": "c", "text": "C.", "ref_text": None, "ref_audio": None, "gt_wav": None},
        {"utt": "d", "text": "D."},
    ]
    path = folder / "m.json"  # .json is read as JSON lines too
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    m = read_manifest(path)
    assert not m.errors
    prompt = (folder / "prompts" / "p.wav").resolve()
    got = [(r.utt, r.prompt_text, r.prompt_wav, r.gt_wav) for r in m.rows]
    assert got == [
        ("a", "r", prompt, None),
        ("b", "p", prompt, (folder / "gt" / "b.wav").resolve()),  # gt_wav need not exist
        ("c", "", None, None),
        ("d", "", None, None),
    ]


def test_jsonl_error_texts(folder):
    path = folder / "m.jsonl"
    path.write_text('[1]\n{"utt": "x", "text": 5}\n')
    m = read_manifest(path)
    assert [(e.line_no, e.reason, e.utt) for e in m.errors] == [
        (1, "expected a JSON object per line", None),
        (2, "key 'text' must be a string, got int", None),
    ]


@pytest.mark.parametrize("utt", ["a b", "XY", "x\x80y", "é"])
def test_ids_that_are_fine(folder, utt):
    m = read_manifest(lst(folder, f"{utt}|||Text."))
    assert not m.errors and [r.utt for r in m.rows] == [utt]


@pytest.mark.parametrize(
    "line, reason",
    [
        ("|||Text.", "empty utterance id"),
        ("a\x7fb|||Text.", "utterance id 'a\\x7fb' contains characters not allowed in a file name: ['\\x7f']"),
        ("a\x1fb|||Text.", "utterance id 'a\\x1fb' contains characters not allowed in a file name: ['\\x1f']"),
        ("a/b\\c|||Text.", "utterance id 'a/b\\\\c' contains characters not allowed in a file name: ['/', '\\\\']"),
        ("..|||Text.", "utterance id '..' starts with '.' (hidden file or path traversal)"),
    ],
)
def test_ids_refused_with_the_reason(folder, line, reason):
    m = read_manifest(lst(folder, line))
    assert [e.reason for e in m.errors] == [reason] and m.rows == []


def test_each_row_error_after_the_id_names_its_utterance(folder):
    m = read_manifest(
        lst(
            folder,
            "x1|||",
            "x2|||Fine.",
            "x2|||Again.",
            "x3||missing.wav|T.",
            "x4||prompts/p.wav|T.|/abs/gt.wav",
            "x5|||Last.",
        )
    )
    assert [(e.line_no, e.utt) for e in m.errors] == [(1, "x1"), (3, "x2"), (4, "x3"), (5, "x4")]
    assert [e.reason.split(" ")[0] for e in m.errors] == ["empty", "duplicate", "reference", "absolute"]
    assert [r.utt for r in m.rows] == ["x2", "x5"]  # rows after a duplicate still count


def test_line_handling_keeps_every_character_of_the_row(folder):
    m = read_manifest(lst(folder, "\ufeffXu1|||Ends with X", "  # an indented comment", "Xu2|||TextX\r"))
    assert not m.errors
    assert [(r.utt, r.text) for r in m.rows] == [("Xu1", "Ends with X"), ("Xu2", "TextX")]


def test_invalid_utf8_names_the_byte_and_its_column(folder):
    m = read_manifest(lst(folder, b"abc\xe9|||Text."))
    assert [e.reason for e in m.errors] == ["not valid UTF-8 (byte 0xe9 at column 4)"]


def test_references_may_be_missing_when_audio_is_not_checked(folder):
    path = lst(folder, "u|ref|missing.wav|Text.")
    assert [e.utt for e in read_manifest(path).errors] == ["u"]
    m = read_manifest(path, check_audio=False)
    assert not m.errors and m.rows[0].prompt_wav == (folder / "missing.wav").resolve()


def test_resolve_audio_path_checks_existence_by_default_and_refuses_nul(folder):
    path, error = resolve_audio_path("missing.wav", folder, False)
    assert path is None and error == f"reference audio not found: {(folder / 'missing.wav').resolve()}"
    assert resolve_audio_path("a\x00.wav", folder, True) == (
        None,
        "reference audio path 'a\\x00.wav' contains a NUL byte",
    )
