"""Crash-safe writes (omnicli/atomic.py) under a real SIGKILL, and resume refusing torn wavs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.atomic import JsonlAppender, read_jsonl, write_bytes_atomic, write_json_atomic
from omnicli.audio import wav_bytes, wav_data_complete
from omnicli.manifest import ManifestRow
from omnicli.synth.plan import wav_matches

REPO = Path(__file__).resolve().parent.parent

# The child stops inside the write, after the data went to disk and before the write
# returns (os.fsync is where every atomic write waits for the disk), says so, and
# waits to be killed: the parent SIGKILLs it exactly mid-write, with no timing guess.
CHILD = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    from omnicli import atomic, audio
    real_fsync = os.fsync
    def stuck_fsync(fd):
        real_fsync(fd)
        print("in-write", flush=True)
        time.sleep(600)
    os.fsync = stuck_fsync
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "bytes":
        atomic.write_bytes_atomic(target, b"x" * 5_000_000)
    elif kind == "json":
        atomic.write_json_atomic(target, {"rows": list(range(100_000))})
    elif kind == "wav":
        audio.write_wav_atomic(target, np.zeros(240_000, np.float32), 24000)
    print("returned", flush=True)
    """
)


def kill_mid_write(kind: str, target: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(target)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout.readline().strip() == "in-write"  # blocks until the child is inside the write
        child.send_signal(signal.SIGKILL)
        assert child.wait(60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("kind, name", [("bytes", "blob.bin"), ("json", "summary.json"), ("wav", "u1.wav")])
def test_kill_mid_write_leaves_nothing_under_the_final_name(tmp_path, kind, name):
    target = tmp_path / name
    kill_mid_write(kind, target)
    assert not target.exists()
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert len(leftovers) == 1 and leftovers[0].startswith(f".{name}.") and leftovers[0].endswith(".tmp")


@pytest.mark.parametrize("kind, name", [("bytes", "blob.bin"), ("json", "summary.json"), ("wav", "u1.wav")])
def test_kill_mid_rewrite_keeps_the_old_file_whole(tmp_path, kind, name):
    target = tmp_path / name
    old = b"the previous, complete version"
    target.write_bytes(old)
    kill_mid_write(kind, target)
    assert target.read_bytes() == old


def test_atomic_write_replaces_and_cleans_up(tmp_path):
    target = tmp_path / "deep" / "er" / "f.json"
    write_json_atomic(target, {"a": "é", "b": [1, 2]})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "é", "b": [1, 2]}
    assert target.read_text(encoding="utf-8").endswith("\n") and "é" in target.read_text(encoding="utf-8")
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in target.parent.iterdir()) == ["f.json"]


def test_a_failing_write_removes_its_temp_file_and_keeps_the_old(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.bin"]


APPENDER_CHILD = textwrap.dedent(
    """
    import sys
    from omnicli.atomic import JsonlAppender
    with JsonlAppender(sys.argv[1]) as out:
        for i in range(10**9):
            out.append({"i": i, "pad": "p" * 5000})
            if i == 50:
                print("appending", flush=True)
    """
)


def test_jsonl_killed_while_appending_keeps_a_whole_prefix(tmp_path):
    path = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(
        [sys.executable, "-c", APPENDER_CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout.readline().strip() == "appending"
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    rows = read_jsonl(path)
    assert len(rows) >= 51 and [r["i"] for r in rows] == list(range(len(rows)))
    with JsonlAppender(path) as out:  # a torn tail, if any, is sealed before the next row
        out.append({"i": "next"})
    assert [r["i"] for r in read_jsonl(path)][-1] == "next" and len(read_jsonl(path)) == len(rows) + 1


def test_jsonl_torn_tail_is_dropped_and_sealed(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\n\n[1]\nnot json\n{"a": 2}\n{"a": 3')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    with JsonlAppender(path) as out:
        out.append({"a": 4})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 4}]
    assert read_jsonl(tmp_path / "absent.jsonl") == []


# ------------------------------------------------------------------ torn wavs


def _wav(tmp_path: Path, frames: int = 24000) -> Path:
    path = tmp_path / "u.wav"
    path.write_bytes(wav_bytes(np.full(frames, 0.1, np.float32), 24000))
    return path


@pytest.mark.parametrize("keep", [1 / 3, 0.99])
def test_a_wav_cut_short_is_not_complete(tmp_path, keep):
    path = _wav(tmp_path)
    data = path.read_bytes()
    assert wav_data_complete(path)
    path.write_bytes(data[: int(len(data) * keep)])
    assert not wav_data_complete(path)
    assert sf.info(str(path)).frames > 0  # libsndfile alone would accept it


def test_one_missing_sample_is_caught(tmp_path):
    path = _wav(tmp_path)
    path.write_bytes(path.read_bytes()[:-2])  # the last 16-bit sample
    assert not wav_data_complete(path)
    # the length check alone tolerates one frame of rounding: the header check does not
    assert not wav_matches(path, 1.0)


@pytest.mark.parametrize(
    "content", [b"", b"RIFF", b"RIFF\x00\x00\x00\x00WAVEfmt ", b"not a wav at all, no RIFF header"]
)
def test_damaged_headers_are_not_complete(tmp_path, content):
    path = tmp_path / "x.wav"
    path.write_bytes(content)
    assert not wav_data_complete(path)
    assert not wav_data_complete(tmp_path / "absent.wav")


def test_chunks_before_data_are_walked(tmp_path):
    # A LIST chunk of odd size (padded to even) between fmt and data, as other writers make.
    path = _wav(tmp_path, frames=100)
    data = path.read_bytes()
    at = data.index(b"data")
    listed = data[:at] + b"LIST" + (3).to_bytes(4, "little") + b"abc\x00" + data[at:]
    path.write_bytes(listed)
    assert wav_data_complete(path) and sf.info(str(path)).frames == 100
    path.write_bytes(listed[:-1])
    assert not wav_data_complete(path)


@pytest.mark.parametrize("cut_bytes", [2, None], ids=["last_sample", "two_thirds"])
def test_resume_redoes_a_wav_whose_data_is_shorter_than_its_header_says(tmp_path, cut_bytes):
    # Rows are read back typed, so the recorded length is always there; it tolerates one
    # frame of rounding, so a wav missing its last sample is caught by the header check alone.
    from omnicli.manifest import Manifest
    from omnicli.synth.plan import RESULTS, input_digest, plan_run
    from omnicli.synth.results import Status, SynthResult

    row = ManifestRow(utt="u", text="Hello.", line_no=1)
    out = tmp_path / "out"
    out.mkdir()
    wav = _wav(out)
    recorded = SynthResult(
        utt="u", status=Status.OK, line=1, wav="u.wav", audio_seconds=1.0, input_digest=input_digest(row)
    )
    (out / RESULTS).write_text(recorded.to_line() + "\n")
    manifest = Manifest(path=tmp_path / "meta.lst", rows=[row], errors=[])
    assert plan_run(manifest, out).done == ["u"]
    data = wav.read_bytes()
    wav.write_bytes(data[: -cut_bytes] if cut_bytes else data[: len(data) // 3])
    plan = plan_run(manifest, out)
    assert plan.done == [] and [r.utt for r in plan.todo] == ["u"]


# ------------------------------------------------- the exact files written


def test_the_temp_file_is_hidden_beside_its_target(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "sub" / "summary.json"
    write_bytes_atomic(target, b"{}")
    (tmp, final), = seen
    assert final == target and tmp.parent == target.parent  # one filesystem: the rename is atomic
    assert tmp.name.startswith(".summary.json.") and tmp.name.endswith(".tmp")  # what resume tidies away
    assert len(tmp.name) == len(".summary.json.") + 8 + len(".tmp")


def test_a_failed_write_reports_its_own_error_even_when_the_temp_file_is_gone(tmp_path, monkeypatch):
    def replace_then_fail(src, dst):
        os.unlink(src)  # e.g. another run tidied it away
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", replace_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_bytes_atomic(tmp_path / "f.bin", b"new")


def test_json_files_are_indented_utf8_with_paths_as_text(tmp_path):
    path = write_json_atomic(tmp_path / "s.json", {"a": "é", "p": Path("/x")})
    assert path.read_bytes() == '{\n  "a": "é",\n  "p": "/x"\n}\n'.encode()


def test_jsonl_lines_are_compact_utf8_with_paths_as_text(tmp_path):
    path = tmp_path / "deep" / "er" / "r.jsonl"  # folders are made
    with JsonlAppender(path) as out:
        out.append({"a": "é", "p": Path("/x")})
        out.append({"b": 2})
    assert path.read_bytes() == '{"a": "é", "p": "/x"}\n{"b": 2}\n'.encode()


@pytest.mark.parametrize(
    "before, after",
    [
        (b"", b'{"n": 1}\n'),  # an empty file: nothing to seal
        (b'{"a": 1}\n', b'{"a": 1}\n{"n": 1}\n'),  # a whole last line: no blank line added
        (b"{", b'{\n{"n": 1}\n'),  # a one-byte torn line is sealed
        (b'{"a": 1}\n{"b', b'{"a": 1}\n{"b\n{"n": 1}\n'),
    ],
)
def test_appending_to_an_existing_file_seals_only_a_torn_line(tmp_path, before, after):
    path = tmp_path / "r.jsonl"
    path.write_bytes(before)
    with JsonlAppender(path) as out:
        out.append({"n": 1})
    assert path.read_bytes() == after


def test_a_closed_appender_refuses_rows_and_closes_once(tmp_path):
    out = JsonlAppender(tmp_path / "r.jsonl")
    out.close()
    out.close()
    with pytest.raises(ValueError):
        out.append({"late": True})
