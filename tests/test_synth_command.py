"""`omni synth` outcomes decided before any engine starts (in-process, fast)."""

from __future__ import annotations

import json

import numpy as np
import soundfile as sf
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.manifest import read_manifest
from omnicli.synth.plan import RESULTS, OutputLock, input_digest

runner = CliRunner()


def synth(*args: str):
    return runner.invoke(app, ["synth", *args, "--profile", "cpu"])


def test_manifest_without_rows_is_a_usage_error(tmp_path):
    (tmp_path / "meta.lst").write_text("# only a comment\n\n")
    result = synth(str(tmp_path / "meta.lst"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "no rows" in result.output


def test_only_invalid_rows_are_reported_per_line_and_exit_1(tmp_path):
    manifest = tmp_path / "meta.lst"
    manifest.write_bytes(b"a|b|c\nbad\xff|x||Text.\nu1|x|missing.wav|Text.\n")
    result = synth(str(manifest), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    for line_no in (1, 2, 3):
        assert f"{manifest}:{line_no}:" in output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["num_invalid_rows"] == 3 and summary["num_rows"] == 0
    assert summary["invalid_rows"][0].startswith(f"{manifest}:1: expected")


def test_an_output_folder_in_use_is_refused(tmp_path):
    (tmp_path / "meta.lst").write_text("u1|||One.\n")
    with OutputLock(tmp_path / "out"):
        result = synth(str(tmp_path / "meta.lst"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "in use by another omni synth run" in " ".join(result.output.split())


def test_resume_with_nothing_to_do_needs_no_engine(tmp_path):
    (tmp_path / "meta.lst").write_text("u1|||One.\nu2|||Two.\n")
    rows = read_manifest(tmp_path / "meta.lst").rows
    out = tmp_path / "out"
    out.mkdir()
    sf.write(out / "u1.wav", np.zeros(2400, np.float32), 24000)
    lines = [
        {"utt": "u1", "status": "ok", "line": 1, "audio_seconds": 0.1, "input_digest": input_digest(rows[0])},
        {"utt": "u2", "status": "failed", "line": 2, "error": "boom", "input_digest": input_digest(rows[1])},
    ]
    (out / RESULTS).write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = synth(str(tmp_path / "meta.lst"), "--out", str(out))
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output  # u2 failed earlier and is not retried
    assert "1 done, 1 failed earlier (not retried; use --retry-failed)" in output
    assert "engine ready" not in output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["num_ok"], summary["num_failed"], summary["num_pending"]) == (1, 1, 0)
    assert summary["failed"] == [{"utt": "u2", "line": 2, "error": "boom"}]


def test_an_unreadable_results_file_is_reported_not_a_traceback(tmp_path):
    (tmp_path / "meta.lst").write_text("u1|||One.\n")
    (tmp_path / "out" / RESULTS).mkdir(parents=True)  # a folder where results.jsonl should be
    result = synth(str(tmp_path / "meta.lst"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "cannot read earlier results" in " ".join(result.output.split())


def test_out_naming_a_file_is_refused_in_one_line(tmp_path):
    # Was `error: [Errno 17] File exists`.
    (tmp_path / "meta.lst").write_text("u1|||One.\n")
    (tmp_path / "taken").write_text("a file")
    for out, extra in ((tmp_path / "taken", ""), (tmp_path / "taken" / "sub", f" ({tmp_path / 'taken'} is a file)")):
        result = synth(str(tmp_path / "meta.lst"), "--out", str(out))
        assert result.exit_code == 2
        assert f"error: --out {out}: not a folder{extra}; give a folder" in " ".join(result.output.split())


def _done_row(out, row) -> dict:
    sf.write(out / f"{row.utt}.wav", np.zeros(2400, np.float32), 24000)
    return {
        "utt": row.utt,
        "status": "ok",
        "line": row.line_no,
        "audio_seconds": 0.1,
        "input_digest": input_digest(row),
    }


def test_invalid_rows_after_the_limit_cut_are_not_part_of_the_run(tmp_path):
    # Was: the bad row on line 3 was reported and made the exit code 1 although nothing ran.
    manifest = tmp_path / "meta.lst"
    manifest.write_text("bad-before\nu1|||One.\nbad-after\nu2|||Two.\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / RESULTS).write_text(json.dumps(_done_row(out, read_manifest(manifest).rows[0])) + "\n")
    result = synth(str(manifest), "--out", str(out), "--limit", "1")
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output  # line 1 lies before the cut: still reported
    assert f"{manifest}:1:" in output and f"{manifest}:3:" not in output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_invalid_rows"] == 1 and summary["num_rows"] == 1
    manifest.write_text("u1|||One.\nbad-after\n")
    result = synth(str(manifest), "--out", str(out), "--limit", "1")
    assert result.exit_code == 0, result.output
    assert "bad-after" not in result.output and json.loads((out / "summary.json").read_text())["num_invalid_rows"] == 0


def test_a_kv_cache_larger_than_the_machine_fails_at_once_in_one_line(tmp_path):
    # Was: accepted, then a 36-line vLLM traceback after the model had loaded (17 s).
    from omnicli.engine.memory import GiB, check_kv_cache_fits, machine_memory_bytes

    memory = machine_memory_bytes()
    assert memory and memory > GiB
    check_kv_cache_fits(1.0, "cpu")
    check_kv_cache_fits(1e6, "cuda")  # a GPU's cache is sized by gpu_memory_utilization instead
    (tmp_path / "meta.lst").write_text("u1|||One.\n")
    result = synth(
        str(tmp_path / "meta.lst"), "--out", str(tmp_path / "out"), "--set", "talker.kv_cache_space_gb=1000000"
    )
    output = " ".join(result.output.split())
    assert result.exit_code == 3, output
    assert (
        f"engine error: talker.kv_cache_space_gb is 1e+06 GiB but this machine has {memory / GiB:.1f} GiB of memory "
        "in all"
        in output
    )
    assert "Traceback" not in output and "engine ready" not in output


def _torn_out(tmp_path):
    """OUT after a crash mid-write: 2 finished rows, a cut-off third, a stale summary."""
    manifest = tmp_path / "meta.lst"
    manifest.write_text("u1|||One.\nu2|||Two.\n")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    rows = [_done_row(out, row) for row in read_manifest(manifest).rows]
    (out / RESULTS).write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + b'{"utt": "u3", "stat')
    (out / "summary.json").write_text(json.dumps({"num_ok": 0, "stale": True}))
    return manifest, out


def test_resume_with_nothing_to_do_repairs_a_torn_results_file_and_the_summary(tmp_path):
    # Was: the torn line stayed (every JSON reader of the file failed) next to a stale summary.
    manifest, out = _torn_out(tmp_path)
    result = synth(str(manifest), "--out", str(out))
    assert result.exit_code == 0, result.output
    lines = (out / RESULTS).read_text().splitlines()
    assert [json.loads(line)["utt"] for line in lines] == ["u1", "u2"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_ok"] == 2 and "stale" not in summary and summary["output_error"] is None


def test_a_summary_that_cannot_be_written_is_removed_not_left_stale(tmp_path, small_fs):
    from tests.conftest import fill_up

    manifest, out = _torn_out(small_fs)
    fill_up(small_fs)
    result = synth(str(manifest), "--out", str(out))
    output = " ".join(result.output.split())
    assert result.exit_code == 4, output
    assert f"error: cannot write to {out}: [Errno 28] No space left on device" in output
    assert "0 utterance(s) left pending (not failed)" in output
    assert not (out / "summary.json").exists()
    assert [json.loads(line)["utt"] for line in (out / RESULTS).read_text().splitlines()] == ["u1", "u2"]
