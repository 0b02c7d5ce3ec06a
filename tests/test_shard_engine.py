"""`omni synth --shard 0/2` and `1/2` on the demo set with the real engine, then
`omni synth-merge`: every row of the manifest once, wavs as a whole run makes them.

The CLI runs in-process on the session's shared engine (no start-up to pay per
run): `Engine.start` hands the command a bridge to that engine, which lives on
the harness's event loop while the command runs its own (asyncio.run).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.manifest import read_manifest
from omnicli.synth.shard import shard_of
from tests.conftest import DEMO_MANIFEST
from tests.fakes import SESSION_PROFILE, share_session_engine

pytestmark = pytest.mark.engine

runner = CliRunner()
PROFILE = SESSION_PROFILE


@pytest.fixture
def shared_engine_cli(engine_harness, monkeypatch):
    """`omni` commands in-process on the shared engine; counts engine start-ups asked for."""
    starts = share_session_engine(monkeypatch, engine_harness)

    def invoke(*args: str):
        return runner.invoke(app, list(args))

    invoke.starts = starts
    return invoke


def test_two_shards_then_merge_cover_the_manifest_once(tmp_path, shared_engine_cli):
    omni = shared_engine_cli
    utts = sorted(row.utt for row in read_manifest(DEMO_MANIFEST).rows)
    for i in (0, 1):
        result = omni(
            "synth",
            str(DEMO_MANIFEST),
            "--out",
            str(tmp_path / f"shard-{i}"),
            "--shard",
            f"{i}/2",
            "--concurrency",
            "4",
            *PROFILE,
        )
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / f"shard-{i}" / "summary.json").read_text())
        mine = [u for u in utts if shard_of(u, 2) == i]
        assert (summary["shard"], summary["num_rows"], summary["num_ok"]) == (f"{i}/2", len(mine), len(mine))
        done = sorted(
            json.loads(line)["utt"] for line in (tmp_path / f"shard-{i}" / "results.jsonl").read_text().splitlines()
        )
        assert done == mine
    assert len(omni.starts) == 2

    merged = tmp_path / "merged"
    result = omni("synth-merge", str(tmp_path / "shard-0"), str(tmp_path / "shard-1"), "--out", str(merged))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (merged / "results.jsonl").read_text().splitlines()]
    assert sorted(r["utt"] for r in rows) == utts and all(r["status"] == "ok" for r in rows)
    assert sorted(p.stem for p in merged.glob("*.wav")) == utts
    summary = json.loads((merged / "summary.json").read_text())
    assert (summary["num_rows"], summary["num_ok"], summary["num_pending"], summary["shard"]) == (
        len(utts),
        len(utts),
        0,
        None,
    )

    # a whole run resumes the merged folder with nothing to do: no engine asked for
    again = omni("synth", str(DEMO_MANIFEST), "--out", str(merged), *PROFILE)
    assert again.exit_code == 0, again.output
    assert f"{len(utts)} done" in " ".join(again.output.split()) and len(omni.starts) == 2

    # per-utterance seeds do not depend on the split: a whole run makes the same wavs
    whole = tmp_path / "whole"
    result = omni("synth", str(DEMO_MANIFEST), "--out", str(whole), "--limit", "3", "--concurrency", "4", *PROFILE)
    assert result.exit_code == 0, result.output
    for wav in whole.glob("*.wav"):
        assert wav.read_bytes() == (merged / wav.name).read_bytes(), wav.name
