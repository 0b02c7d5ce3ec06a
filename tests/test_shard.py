"""`omni synth --shard I/N` and `omni synth-merge`, without an engine: the split, the
folder rules, and merges of hand-made shard folders (real wavs, typed rows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import jsonschema
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.manifest import read_manifest
from omnicli.synth import plan as synth_plan
from omnicli.synth import shard as shard_module
from omnicli.synth.plan import RESULTS, SUMMARY
from omnicli.synth.results import Status, SynthResult
from omnicli.synth.shard import ShardSpec, ShardSpecError, select_shard, shard_of
from tests.conftest import REPO, fill_up, mount_tmpfs, unmount
from tests.fakes import make_manifest, make_shard, make_shards, merge, summary_of, words

runner = CliRunner()


@pytest.mark.parametrize("count", [1, 2, 3, 7, 64])  # 64 > the 40 rows: most shards own nothing
def test_every_row_belongs_to_exactly_one_shard(count):
    utts = [f"utt_{i:03d}" for i in range(40)]
    owners = {utt: [i for i in range(count) if ShardSpec(i, count).owns(utt)] for utt in utts}
    assert all(len(found) == 1 for found in owners.values()), owners
    assert sorted(u for i in range(count) for u in utts if ShardSpec(i, count).owns(u)) == utts


def test_the_split_is_the_same_in_another_process():
    # Python's hash() of a str changes with PYTHONHASHSEED; the split must not.
    utts = [f"seed_{i}" for i in range(200)] + ["demo_000", "ünïcode-ütt", "x" * 200]
    here = [shard_of(u, 5) for u in utts]
    script = ("import json,sys; from omnicli.synth.shard import shard_of; "
              "print(json.dumps([shard_of(u, 5) for u in json.load(sys.stdin)]))")
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(utts),
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        assert json.loads(proc.stdout) == here


def test_shards_are_roughly_balanced():
    counts = Counter(shard_of(f"utt{i}", 8) for i in range(8000))
    assert set(counts) == set(range(8))
    assert all(900 <= n <= 1100 for n in counts.values()), counts  # 1000 each +-10%


def test_the_split_is_pinned_across_releases():
    # Existing shard folders depend on it: the first 8 bytes of sha256(utt), big-endian, mod N.
    assert [shard_of(u, 1000) for u in ("u1", "demo_000", "utt-ü", "")] == [42, 868, 796, 652]
    assert shard_of("u1", 2**40) == 58991561402  # all 8 bytes count, no more


def test_shard_specs_parse_and_refuse():
    assert ShardSpec.parse(" 2/5 ") == ShardSpec(2, 5) and str(ShardSpec(2, 5)) == "2/5"
    assert ShardSpec.parse("0/1") == ShardSpec(0, 1)  # one shard: a whole run, recorded as such
    for bad in ("3/2", "2/2", "1/0", "x/2", "1/y", "-1/2", "2", "", "1/2/3"):
        with pytest.raises(ShardSpecError):
            ShardSpec.parse(bad)


@pytest.mark.parametrize(
    ("value", "reason"),
    [("3/2", "must lie in 0..1"), ("1/0", "N must be at least 1"), ("x/2", "whole numbers"), ("1", "is not I/N")],
)
def test_bad_shard_values_exit_2_with_the_reason(tmp_path, value, reason):
    result = runner.invoke(app, ["synth", "--demo", "--out", str(tmp_path / "out"), "--shard", value])
    assert result.exit_code == 2
    assert "--shard" in words(result.output) and reason in words(result.output)
    assert not (tmp_path / "out").exists()


def test_invalid_rows_are_owned_by_one_shard_each(tmp_path):
    manifest = tmp_path / "meta.lst"
    lines = [f"u{i}|||Text {i}." for i in range(12)] + ["no fields", "u3|||duplicate.", "bad/utt|||x.", "u20|||"]
    manifest.write_text("\n".join(lines) + "\n")
    parsed = read_manifest(manifest)
    assert len(parsed.errors) == 4
    for count in (1, 2, 3, 5):
        shares = [select_shard(parsed, ShardSpec(i, count)) for i in range(count)]
        assert sorted(e.line_no for s in shares for e in s.errors) == sorted(e.line_no for e in parsed.errors)
        assert sorted(r.utt for s in shares for r in s.rows) == sorted(r.utt for r in parsed.rows)
    # the duplicate of u3 is reported by u3's shard
    dup_owner = next(i for i in range(3) if any(e.line_no == 14 for e in select_shard(parsed, ShardSpec(i, 3)).errors))
    assert dup_owner == shard_of("u3", 3)


def test_the_module_names_the_same_files_as_synth_plan():
    assert (shard_module.RESULTS, shard_module.SUMMARY) == (synth_plan.RESULTS, synth_plan.SUMMARY)


# -- hand-made shard folders ------------------------------------------------------------------


def test_merge_gives_one_whole_folder_that_synth_resumes_with_nothing_to_do(tmp_path):
    manifest = make_manifest(tmp_path / "data", 20, extra=["broken line", "u03|||dup."])
    shards = make_shards(tmp_path, manifest, 3, failed={"u05"})
    assert sum(summary_of(s)["num_rows"] for s in shards) == 20
    out = tmp_path / "merged"
    result = merge(*shards, "--out", out)
    assert result.exit_code == 1, result.output  # u05 failed, two rows invalid
    text = words(result.output)
    assert "3 of 3" in text and "19 / 1 / 0" in text
    summary = summary_of(out)
    assert (summary["num_rows"], summary["num_ok"], summary["num_failed"], summary["num_pending"]) == (20, 19, 1, 0)
    assert summary["num_invalid_rows"] == 2 and summary["shard"] is None  # each bad row once, not once per shard
    assert summary["manifest"] == str(manifest) and summary["out_dir"] == str(out)
    assert summary["failed"] == [{"utt": "u05", "line": 6, "error": "injected"}]
    rows = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert sorted(r["utt"] for r in rows) == [f"u{i:02d}" for i in range(20)]
    for i in range(20):
        if i == 5:
            continue
        wav, shard_dir = out / f"u{i:02d}.wav", shards[shard_of(f"u{i:02d}", 3)]
        assert os.path.samefile(wav, shard_dir / wav.name)  # hard-linked: one file system here
        assert sf.info(wav).frames == 240 * (1 + (i + 1) % 50)
    assert "20 hard-linked" not in text and "19 hard-linked, 0 copied" in text
    jsonschema.validate(summary, json.loads(runner.invoke(app, ["schema", "summary"]).output))
    # the merged folder is a normal synth folder: a plain run has nothing to do
    again = runner.invoke(app, ["synth", str(manifest), "--out", str(out), "--profile", "cpu"])
    assert again.exit_code == 1, again.output  # the failed row is not retried and the bad rows stay bad
    assert "19 done, 1 failed earlier" in words(again.output) and "engine ready" not in again.output
    assert summary_of(out)["num_ok"] == 19


def test_a_missing_shard_and_rows_not_done_stay_pending(tmp_path):
    manifest = make_manifest(tmp_path / "data", 12)
    shards = make_shards(tmp_path, manifest, 3, skip={"u00", "u01"})
    out = tmp_path / "merged"
    result = merge(shards[0], shards[2], "--out", out)
    assert result.exit_code == 1
    assert "shard(s) 1/3: their rows are pending" in words(result.output)
    owned_by_1 = [f"u{i:02d}" for i in range(12) if shard_of(f"u{i:02d}", 3) == 1]
    summary = summary_of(out)
    assert summary["num_pending"] == len(owned_by_1) + 2 - sum(u in ("u00", "u01") for u in owned_by_1)
    assert summary["num_ok"] == 12 - summary["num_pending"]
    # the missing shard arrives: merging again into the same folder completes it
    make_shard(tmp_path / "shard-1", manifest, ShardSpec(1, 3))
    make_shard(shards[0], manifest, ShardSpec(0, 3))
    make_shard(shards[2], manifest, ShardSpec(2, 3))
    result = merge(
        *sorted(tmp_path.iterdir()), "--out", out
    )  # `tmp/*`: the data folder is refused, OUT itself left out
    assert result.exit_code == 2 and "data: no summary.json" in words(result.output)
    result = merge(*sorted(p for p in tmp_path.iterdir() if p.name != "data"), "--out", out)
    assert result.exit_code == 0, result.output
    assert f"{out} is --out itself: not read as a shard" in words(result.output)
    assert (summary_of(out)["num_ok"], summary_of(out)["num_pending"]) == (12, 0)
    assert len((out / RESULTS).read_text().splitlines()) == 12


def test_rows_of_another_shard_and_damaged_wavs_are_never_counted(tmp_path):
    manifest = make_manifest(tmp_path / "data", 10)
    shards = make_shards(tmp_path, manifest, 2)
    # a row of shard 1 copied into shard 0's folder (by hand, or an old run): ignored
    stranger = next(f"u{i:02d}" for i in range(10) if shard_of(f"u{i:02d}", 2) == 1)
    with open(shards[0] / RESULTS, "a") as f:
        f.write(SynthResult(utt=stranger, status=Status.FAILED, line=1, error="from elsewhere").to_line() + "\n")
    # a wav of shard 1 cut short after its row was written
    victim = next(f"u{i:02d}" for i in range(10) if shard_of(f"u{i:02d}", 2) == 1 and f"u{i:02d}" != stranger)
    (shards[1] / f"{victim}.wav").write_bytes((shards[1] / f"{victim}.wav").read_bytes()[:100])
    out = tmp_path / "merged"
    result = merge(*shards, "--out", out)
    assert result.exit_code == 1
    text = words(result.output)
    assert f"not taken {shards[1] / victim}.wav: missing or damaged (left pending)" in text
    assert "1 row(s) in the shard folders belong to no shard" in text
    summary = summary_of(out)
    assert (summary["num_ok"], summary["num_failed"], summary["num_pending"]) == (9, 0, 1)
    assert not (out / f"{victim}.wav").exists()


def test_shards_of_different_splits_manifests_or_limits_are_refused(tmp_path):
    manifest = make_manifest(tmp_path / "data", 8)
    other = make_manifest(tmp_path / "other", 16)  # other rows: same path layout, another manifest
    two = make_shards(tmp_path / "two", manifest, 2)
    three = make_shards(tmp_path / "three", manifest, 3)
    elsewhere = make_shard(tmp_path / "elsewhere", other, ShardSpec(1, 2))
    limited = make_shard(tmp_path / "limited", manifest, ShardSpec(1, 2), limit=5)
    whole = make_shard(tmp_path / "whole", manifest, None)
    out = tmp_path / "merged"
    cases = [
        ((two[0], three[1]), "shards of different splits (N = 2, 3)"),
        ((two[0], make_shard(tmp_path / "again", manifest, ShardSpec(0, 2))), "shard 0/2 is given twice"),
        ((two[0], elsewhere), "the shards ran different manifests"),
        ((two[0], limited), "different --limit values"),
        ((two[0], whole), "not a shard folder"),
        ((two[0], tmp_path / "nothing-here"), "not a folder"),
        ((two[0], tmp_path / "data"), "no summary.json"),
    ]
    for folders, message in cases:
        result = merge(*folders, "--out", out)
        assert result.exit_code == 2 and message in words(result.output), (message, result.output)
    assert not out.exists()
    # one file under two paths is fine with --manifest; a different manifest's rows are not
    result = merge(two[0], elsewhere, "--out", out, "--manifest", manifest)
    assert result.exit_code == 2 and "was it run on another version of the manifest" in words(result.output)
    # a shard folder or another manifest's folder is no place to merge into
    assert "--out " + str(two[1]) + " holds shard 1/2 of a run" in words(merge(*two, "--out", two[1]).output)
    assert "holds shard 0/3" in words(merge(*two, "--out", three[0]).output)
    make_shard(tmp_path / "other-whole", other, None)
    assert "holds results of another manifest" in words(merge(*two, "--out", tmp_path / "other-whole").output)


def test_shards_with_different_profiles_merge_with_a_note(tmp_path):
    manifest = make_manifest(tmp_path / "data", 6)
    a = make_shard(tmp_path / "a", manifest, ShardSpec(0, 2))
    b = make_shard(tmp_path / "b", manifest, ShardSpec(1, 2), profile_sets=["talker.max_num_seqs=3"])
    result = merge(a, b, "--out", tmp_path / "merged")
    assert result.exit_code == 0, result.output
    digests = (summary_of(a)["profile_digest"], summary_of(b)["profile_digest"])
    assert digests[0] != digests[1]
    assert f"the shards ran different profiles ({digests[0]}, {digests[1]})" in words(result.output)
    assert summary_of(tmp_path / "merged")["profile_digest"] == digests[0]


def test_wavs_on_another_file_system_are_copied(tmp_path):
    manifest = make_manifest(tmp_path / "data", 6)
    shards = make_shards(tmp_path, manifest, 2)
    mount = tmp_path / "other-fs"
    why_not = mount_tmpfs(mount, size="4m")
    if why_not:
        pytest.skip(why_not)
    try:
        out = mount / "merged"
        result = merge(*shards, "--out", out)
        assert result.exit_code == 0, result.output
        assert "0 hard-linked, 6 copied" in words(result.output)
        for i in range(6):
            wav = out / f"u{i:02d}.wav"
            assert wav.read_bytes() == (shards[shard_of(wav.stem, 2)] / wav.name).read_bytes()
        assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    finally:
        unmount(mount)


# -- `omni synth --shard` into folders (no engine needed: nothing left to do) -----------------


def test_a_shard_run_records_its_shard_and_counts_only_its_rows(tmp_path):
    manifest = make_manifest(tmp_path / "data", 10, extra=["not a row"])
    out = make_shard(tmp_path / "s1", manifest, ShardSpec(1, 2))
    (out / SUMMARY).unlink()  # as after a kill -9: the run rebuilds it
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(out), "--shard", "1/2", "--profile", "cpu"])
    mine = [f"u{i:02d}" for i in range(10) if shard_of(f"u{i:02d}", 2) == 1]
    bad_line_is_mine = ShardSpec(1, 2).owns("\x00line 11")
    assert result.exit_code == (1 if bad_line_is_mine else 0), result.output
    assert f"shard 1/2: {len(mine)} of 10 rows" in words(result.output)
    assert f"{len(mine)} done" in words(result.output) and "engine ready" not in result.output
    summary = summary_of(out)
    assert (summary["shard"], summary["num_rows"], summary["num_ok"]) == ("1/2", len(mine), len(mine))
    assert summary["num_invalid_rows"] == int(bad_line_is_mine)


def test_limit_cuts_the_manifest_before_the_split(tmp_path):
    manifest = make_manifest(tmp_path / "data", 12)
    first_five = {f"u{i:02d}" for i in range(5)}
    covered = []
    for i in range(3):
        out = make_shard(tmp_path / f"s{i}", manifest, ShardSpec(i, 3), limit=5)
        result = runner.invoke(
            app, ["synth", str(manifest), "--out", str(out), "--shard", f"{i}/3", "--limit", "5", "--profile", "cpu"]
        )
        assert result.exit_code == 0, result.output
        summary = summary_of(out)
        assert summary["limit"] == 5 and summary["num_pending"] == 0
        covered += [json.loads(line)["utt"] for line in (out / RESULTS).read_text().splitlines()]
    assert sorted(covered) == sorted(first_five)
    result = merge(*(tmp_path / f"s{i}" for i in range(3)), "--out", tmp_path / "merged")
    assert result.exit_code == 0, result.output
    assert (summary_of(tmp_path / "merged")["num_rows"], summary_of(tmp_path / "merged")["limit"]) == (5, 5)


def test_a_folder_of_another_shard_spec_is_refused(tmp_path):
    manifest = make_manifest(tmp_path / "data", 6)
    shard0 = make_shard(tmp_path / "s0", manifest, ShardSpec(0, 2))
    whole = make_shard(tmp_path / "whole", manifest, None)
    cases = [
        (shard0, ["--shard", "1/2"], "holds shard 0/2, not 1/2"),
        (shard0, ["--shard", "0/3"], "holds shard 0/2, not 0/3"),
        (shard0, [], "holds shard 0/2: resume it with --shard 0/2"),
        (whole, ["--shard", "0/2"], "holds a whole run (or a merge of shards), not shard 0/2"),
    ]
    for out, extra, message in cases:
        before = (out / RESULTS).read_bytes(), (out / SUMMARY).read_bytes()
        result = runner.invoke(app, ["synth", str(manifest), "--out", str(out), *extra, "--profile", "cpu"])
        assert result.exit_code == 2 and message in words(result.output), result.output
        assert ((out / RESULTS).read_bytes(), (out / SUMMARY).read_bytes()) == before


def test_results_of_other_shards_in_a_shard_folder_are_noted_not_counted(tmp_path):
    manifest = make_manifest(tmp_path / "data", 8)
    whole = make_shard(tmp_path / "s0", manifest, None)  # every row done, as by a whole run
    (whole / SUMMARY).unlink()  # ...that was killed before its summary
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(whole), "--shard", "0/2", "--profile", "cpu"])
    mine = sum(shard_of(f"u{i:02d}", 2) == 0 for i in range(8))
    assert result.exit_code == 0, result.output
    assert f"{8 - mine} row(s) in {whole / RESULTS} belong to other shards than 0/2: not counted here" in words(
        result.output
    )
    assert (summary_of(whole)["num_rows"], summary_of(whole)["num_ok"]) == (mine, mine)


def test_a_full_disk_stops_the_merge_with_exit_4_and_merging_again_finishes(tmp_path, small_fs):
    manifest = make_manifest(tmp_path / "data", 20)  # about 110 kB of wavs on a 256 kB file system
    shards = make_shards(tmp_path, manifest, 2)
    filler = fill_up(small_fs, leave=40_000)  # room for a few wavs, not for all
    out = small_fs / "merged"
    result = merge(*shards, "--out", out)
    assert result.exit_code == 4, result.output
    assert f"cannot write to {out}" in words(result.output)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # no partial copy left
    assert not (out / RESULTS).exists() and not (out / SUMMARY).exists()  # no row without its wav
    for wav in out.glob("*.wav"):  # the wavs that made it are whole
        assert wav.read_bytes() == (shards[shard_of(wav.stem, 2)] / wav.name).read_bytes()
    filler.unlink()
    result = merge(*shards, "--out", out)
    assert result.exit_code == 0, result.output
    assert summary_of(out)["num_ok"] == 20


def test_a_folder_records_its_shard_only_in_a_readable_summary(tmp_path):
    assert shard_module.recorded_shard(tmp_path) == (False, None)  # no summary yet
    (tmp_path / SUMMARY).write_text("[1, 2]")  # JSON, but not a summary: rewritten by the run
    assert shard_module.recorded_shard(tmp_path) == (False, None)
    (tmp_path / SUMMARY).write_text('{"shard": 3}')  # a summary whose shard is not "I/N"
    assert shard_module.recorded_shard(tmp_path) == (True, None)
    (tmp_path / SUMMARY).write_text('{"shard": "1/4"}')
    assert shard_module.recorded_shard(tmp_path) == (True, "1/4")


def test_conflict_messages_say_what_to_do_in_full(tmp_path):
    (tmp_path / SUMMARY).write_text('{"shard": null}')
    assert shard_module.shard_conflict(tmp_path, ShardSpec(1, 2)) == (
        f"{tmp_path} holds a whole run (or a merge of shards), not shard 1/2: "
        "give each shard a folder of its own (e.g. --out out/shard-I)"
    )
    (tmp_path / SUMMARY).write_text('{"shard": "0/2"}')
    assert shard_module.shard_conflict(tmp_path, None) == (
        f"{tmp_path} holds shard 0/2: resume it with --shard 0/2, or combine the shard folders with `omni synth-merge`"
    )
    assert shard_module.shard_conflict(tmp_path, ShardSpec(0, 2)) is None


def test_a_whole_run_has_no_foreign_rows(tmp_path):
    (tmp_path / RESULTS).write_text("".join(json.dumps({"utt": f"u{i}"}) + "\n" for i in range(6)))
    assert shard_module.foreign_rows(tmp_path, None) == 0
    assert shard_module.foreign_rows(tmp_path, ShardSpec(0, 2)) == sum(shard_of(f"u{i}", 2) != 0 for i in range(6))
