"""`SynthRun` (plan -> drive -> sink) against the small fake engine of tests/fakes.py (this component only)."""

from __future__ import annotations

import asyncio

import pytest
import soundfile as sf

from omnicli.engine.request import EngineDead
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.plan import plan_run
from omnicli.synth.results import SynthResult, SynthSummary
from omnicli.synth.run import SynthRun
from omnicli.synth.summary import build_synth_summary
from tests.fakes import FakeEngine, run_synth, write_manifest


def test_rows_are_written_typed_and_a_failed_request_fails_alone(tmp_path):
    m, out, run, rows = run_synth(tmp_path, ["one", "fail", "two"], concurrency=2)
    assert {u: r["status"] for u, r in rows.items()} == {"u0": "ok", "u1": "failed", "u2": "ok"}
    assert rows["u1"]["error"] == "codec chunk over budget" and "error" in rows["u1"]["flags"]
    assert sf.info(out / "u0.wav").frames == 3 * 100 and not (out / "u1.wav").exists()
    for row in rows.values():
        SynthResult.model_validate(row)  # what was written reads back typed
    summary = build_synth_summary(m, out, run, resolved=load_profile("cpu"))
    assert isinstance(summary, SynthSummary) and (summary.num_ok, summary.num_failed, summary.num_pending) == (2, 1, 0)
    assert plan_run(m, out).done == ["u0", "u2"]
    # audio-s/s counts ok rows only; what the failed row produced before failing is shown apart
    ok_audio = rows["u0"]["audio_seconds"] + rows["u2"]["audio_seconds"]
    assert ok_audio == pytest.approx(2 * 3 * 100 / 1000) and rows["u1"]["audio_seconds"] > 0
    assert summary.this_run.audio_seconds == pytest.approx(ok_audio)
    assert summary.this_run.failed_audio_seconds == pytest.approx(rows["u1"]["audio_seconds"])
    assert summary.this_run.audio_throughput == pytest.approx(ok_audio / summary.this_run.wall_seconds, rel=0.01)


def test_an_engine_death_stops_the_run_and_leaves_rows_pending(tmp_path):
    m, out, run, rows = run_synth(tmp_path, ["one", "die", "hang", "four"], concurrency=1)
    assert isinstance(run.engine_error, EngineDead) and str(run.engine_error).startswith("codec stage stopped")
    assert list(rows) == ["u0"]  # the death is nobody's failure: nothing recorded for u1
    assert run.left_pending == ["u1"]
    assert [r.utt for r in plan_run(m, out).todo] == ["u1", "u2", "u3"]


def test_a_stop_leaves_requests_in_flight_pending_after_the_grace(tmp_path):
    m = read_manifest(write_manifest(tmp_path, ["one", "hang", "hang", "never"]))
    out = tmp_path / "out"
    run = SynthRun(FakeEngine(), out, resolved=load_profile("cpu"), concurrency=2, grace_s=0.05)

    async def main():
        task = asyncio.create_task(run.run(m.rows))
        await asyncio.sleep(0.2)
        run.stop.set()
        await task

    asyncio.run(main())
    assert [r.utt for r in run.results] == ["u0"]
    assert run.left_pending == ["u1", "u2"] and run.engine_error is None  # u3 was never admitted
