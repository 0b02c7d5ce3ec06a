"""Resume and `omni synth-merge` trust only what they can check: rows without an input
digest, rows with NaN / infinite / absurd numbers, symlinked wavs in shard folders, and a
merge run again into the same folder (no engine; real wavs, real folders)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.manifest import read_manifest
from omnicli.synth import SynthJob
from omnicli.synth.plan import RESULTS, SUMMARY, input_digest, plan_run, tidy_out_dir
from omnicli.synth.shard import ShardSpec, shard_of
from omnicli.synth.summary import build_synth_summary
from tests.fakes import make_manifest, make_shard, make_shards, merge, summary_of, words

runner = CliRunner()
SR = 24_000


def finished_row(out: Path, row, **fields) -> dict:
    """An ok row with its wav (0.5 s), as a run writes it, with `fields` replaced."""
    sf.write(out / f"{row.utt}.wav", np.zeros(SR // 2, np.float32), SR, subtype="PCM_16")
    d = {"utt": row.utt, "status": "ok", "line": row.line_no, "wav": f"{row.utt}.wav", "audio_seconds": 0.5,
         "input_digest": input_digest(row), "profile_digest": "p1"}
    d.update(fields)
    return {k: v for k, v in d.items() if v is not ...}  # `...`: the key left out


def write_rows(out: Path, rows: list[dict]) -> None:
    # json.dumps writes NaN and Infinity as JavaScript does: what a hand edit or another tool leaves
    (out / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))


# -- resume -------------------------------------------------------------------------------------


def test_a_row_without_an_input_digest_is_redone_and_the_resume_says_so(tmp_path, monkeypatch):
    manifest = make_manifest(tmp_path / "data", 4)
    parsed = read_manifest(manifest)
    out = tmp_path / "out"
    out.mkdir()
    r = parsed.rows
    # u01: the key missing, u02: empty (was: both counted done, the stale wav kept, silently)
    write_rows(
        out,
        [
            finished_row(out, r[0]),
            finished_row(out, r[1], input_digest=...),
            finished_row(out, r[2], input_digest=""),
            finished_row(out, r[3]),
        ],
    )
    plan = plan_run(parsed, out)
    assert plan.done == ["u00", "u03"] and plan.undigested == ["u01", "u02"] and plan.changed == []
    assert [x.utt for x in plan.todo] == ["u01", "u02"]

    async def no_engine(self, rows):  # what was planned is what matters here
        assert [x.utt for x in rows] == ["u01", "u02"]

    monkeypatch.setattr(SynthJob, "_run_local", no_engine)
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(out), "--profile", "cpu"])
    assert (
        "2 done, 0 failed earlier, 0 changed in the manifest, 2 without an input digest (cannot tell what they were "
        "made from: redone), 2 to do"
        in words(result.output)
    )


@pytest.mark.parametrize(
    "field, value",
    [
        ("audio_seconds", float("nan")),
        ("audio_seconds", float("inf")),
        ("audio_seconds", 1e308),
        ("audio_seconds", -1.0),
        ("ttfp_s", float("nan")),
        ("rtf", float("-inf")),
    ],
)
def test_a_row_with_non_finite_or_absurd_numbers_is_pending_never_a_crash(tmp_path, field, value):
    manifest = make_manifest(tmp_path / "data", 3)
    parsed = read_manifest(manifest)
    out = tmp_path / "out"
    out.mkdir()
    r = parsed.rows
    write_rows(out, [finished_row(out, r[0]), finished_row(out, r[1], **{field: value}), finished_row(out, r[2])])
    plan = plan_run(parsed, out)  # was: ValueError: cannot convert float NaN to integer (OverflowError for inf)
    assert plan.done == ["u00", "u02"] and [x.utt for x in plan.todo] == ["u01"]
    tidy_out_dir(out)  # the row no run could have written is dropped: its utterance is pending
    assert [json.loads(line)["utt"] for line in (out / RESULTS).read_text().splitlines()] == ["u00", "u02"]
    summary = build_synth_summary(parsed, out, None, resolved=_Recorded(), started_at="t0")
    assert (summary.num_ok, summary.num_pending, summary.audio_seconds) == (2, 1, 1.0)


class _Recorded:
    """The few resolved-profile facts build_synth_summary reads."""

    name, digest = "cpu", "p1"

    class profile:  # mirrors ResolvedProfile.profile
        model = "omni-tiny"

    def to_dict(self) -> dict:
        return {}


# -- merge ------------------------------------------------------------------------------------------


def shard_rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / RESULTS).read_text().splitlines()]


def edit_row(folder: Path, utt: str, **fields) -> None:
    rows = shard_rows(folder)
    for row in rows:
        if row["utt"] == utt:
            row.update(fields)
            for key in [k for k, v in fields.items() if v is ...]:
                del row[key]
    write_rows(folder, rows)


def test_merge_leaves_rows_without_a_digest_or_with_nan_pending_and_writes_the_rest(tmp_path):
    manifest = make_manifest(tmp_path / "data", 16)
    shards = make_shards(tmp_path, manifest, 2)
    in_0 = [f"u{i:02d}" for i in range(16) if shard_of(f"u{i:02d}", 2) == 0]
    edit_row(shards[0], in_0[0], input_digest="")
    edit_row(shards[0], in_0[1], input_digest=...)
    edit_row(shards[0], in_0[2], audio_seconds=float("nan"))
    out = tmp_path / "merged"
    result = merge(*shards, "--out", out)
    assert result.exit_code == 1, result.output  # was: a NaN traceback, exit 1, linked wavs and no results.jsonl
    text = words(result.output)
    assert f"{shards[0]}: {in_0[0]}: no input digest to check it against {manifest}:" in text
    assert f"{shards[0]}: {in_0[1]}: no input digest to check it against" in text
    summary = summary_of(out)
    assert (summary["num_ok"], summary["num_pending"]) == (13, 3)
    merged = {row["utt"] for row in shard_rows(out)}
    assert merged == {f"u{i:02d}" for i in range(16)} - set(in_0[:3])
    assert {p.stem for p in out.glob("*.wav")} == merged  # every wav in OUT has its row


def test_merge_follows_symlinks_to_files_inside_the_shard_and_refuses_the_rest(tmp_path):
    manifest = make_manifest(tmp_path / "data", 10)
    shard = make_shard(tmp_path / "shard-0", manifest, ShardSpec(0, 1))
    outside = tmp_path / "outside.wav"
    sf.write(outside, np.zeros(240, np.float32), SR)
    (shard / "store").mkdir()
    os.replace(shard / "u00.wav", shard / "store" / "u00.wav")
    (shard / "u00.wav").symlink_to("store/u00.wav")  # relative, inside: followed
    (shard / "u01.wav").unlink()
    (shard / "u01.wav").symlink_to("gone.wav")  # dangling
    (shard / "u02.wav").unlink()
    (shard / "u02.wav").symlink_to(outside)  # absolute, outside
    (shard / "u03.wav").unlink()
    (shard / "u03.wav").symlink_to("../outside.wav")  # relative, escaping
    (shard / "u04.wav").unlink()
    (shard / "u04.wav").symlink_to("store")  # not a regular file
    out = tmp_path / "merged"
    result = merge(shard, "--out", out)
    assert result.exit_code == 1, result.output
    text = words(result.output)
    assert f"not taken {shard / 'u01.wav'}: a symlink that leads nowhere" in text
    assert f"not taken {shard / 'u02.wav'}: a symlink to {outside}, outside the shard folder" in text
    assert f"not taken {shard / 'u03.wav'}: a symlink to {outside}, outside the shard folder" in text
    assert f"not taken {shard / 'u04.wav'}: a symlink to {shard.resolve() / 'store'}, not a regular file" in text
    assert not any(p.is_symlink() for p in out.iterdir())  # was: the relative link copied, dangling in OUT
    assert os.path.samefile(out / "u00.wav", shard / "store" / "u00.wav")
    assert (summary_of(out)["num_ok"], summary_of(out)["num_pending"]) == (6, 4)


def test_merging_again_into_the_same_folder_leaves_no_temp_file(tmp_path):
    manifest = make_manifest(tmp_path / "data", 6)
    shards = make_shards(tmp_path, manifest, 2)
    out = tmp_path / "merged"
    assert merge(*shards, "--out", out).exit_code == 0
    result = merge(*shards, "--out", out)
    assert result.exit_code == 0, result.output
    # was: one .<utt>.wav.<hex>.tmp hard link per wav (renaming a link onto its own file is a no-op)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".omni-synth.lock"]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        [f"u{i:02d}.wav" for i in range(6)] + [RESULTS, SUMMARY]
    )


# -- --shard I/N ----------------------------------------------------------------------------------


def test_a_shard_spec_takes_the_digits_0_to_9_only(tmp_path):
    from omnicli.synth.shard import ShardSpecError

    for bad in ("1_0/20", "\u0661/\u0662", "+1/+2", "1/+2", "0/2_0", "\uff11/4", "1.0/2"):  # was: 1_0/20 read as 10/20
        with pytest.raises(ShardSpecError, match="digits 0-9"):
            ShardSpec.parse(bad)
    result = runner.invoke(app, ["synth", "--demo", "--out", str(tmp_path / "out"), "--shard", "1_0/20"])
    assert result.exit_code == 2 and "digits 0-9" in words(result.output) and not (tmp_path / "out").exists()
    assert ShardSpec.parse("10/20") == ShardSpec(10, 20)
