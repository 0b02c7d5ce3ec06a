"""Prompt selection: demo default, shuffling with a seed, cycling, bad rows reported."""

import shutil
from types import SimpleNamespace

import numpy as np

from omnicli.benchmark.prompts import DEMO_NUM_PROMPTS, load_prompts, select_rows
from omnicli.datasets import demo_manifest_path


def rows(n):
    return [SimpleNamespace(utt=f"u{i}") for i in range(n)]


def test_cycles_in_order_without_shuffle():
    assert [r.utt for r in select_rows(rows(3), 7, seed=0, shuffle=False)] == ["u0", "u1", "u2", "u0", "u1", "u2", "u0"]
    assert [r.utt for r in select_rows(rows(3), None, seed=0, shuffle=False)] == ["u0", "u1", "u2"]
    assert select_rows([], 5, 0, True) == []


def test_shuffle_is_seeded_and_covers_every_row():
    a = [r.utt for r in select_rows(rows(20), 20, seed=1, shuffle=True)]
    assert a == [r.utt for r in select_rows(rows(20), 20, seed=1, shuffle=True)]
    assert a != [r.utt for r in select_rows(rows(20), 20, seed=2, shuffle=True)]
    assert sorted(a) == sorted(f"u{i}" for i in range(20))


def test_demo_set_default():
    ps = load_prompts(None)
    assert ps.source == demo_manifest_path() and not ps.errors
    assert len(ps.prompts) == DEMO_NUM_PROMPTS and ps.num_rows == 8
    p = ps.prompts[0]
    assert p.request.ref_audio is not None and p.request.ref_sample_rate > 0 and p.request.ref_text
    assert p.reference.endswith(".wav")
    # each distinct row loads its reference once; cycled prompts share it
    same = [q for q in ps.prompts if q.utt == p.utt]
    assert len(same) == 4 and all(q.request is p.request for q in same)


def test_max_new_tokens_and_bad_reference(tmp_path):
    src = demo_manifest_path().parent / "prompts" / "heart_juice.wav"
    shutil.copy(src, tmp_path / "good.wav")
    (tmp_path / "bad.wav").write_bytes(b"garbage")
    (tmp_path / "m.lst").write_text("a|ref|good.wav|Hello.\nb|ref|bad.wav|World.\n")
    ps = load_prompts(tmp_path / "m.lst", max_new_tokens=7, shuffle=False)
    assert [p.utt for p in ps.prompts] == ["a"]
    assert ps.prompts[0].request.max_new_tokens == 7
    assert isinstance(ps.prompts[0].request.ref_audio, np.ndarray)
    assert len(ps.errors) == 1 and f"{tmp_path / 'm.lst'}:2" in ps.errors[0]


def test_request_fields_fill_what_a_row_leaves_unset(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"utt": "own", "text": "hi", "voice": "leah"}\n{"utt": "plain", "text": "hello"}\n')
    ps = load_prompts(manifest, shuffle=False, request_fields={"voice": "tara", "seed": 7})  # --extra-body
    sent = {p.utt: p.request for p in ps.prompts}
    assert (sent["own"].voice, sent["plain"].voice) == ("leah", "tara")  # a row's own value wins
    assert sent["own"].seed == sent["plain"].seed == 7
