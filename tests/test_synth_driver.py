"""`SynthRun` (plan -> drive -> sink) against a small fake EngineLike (this component only).

The fake follows the documented engine contract: `generate` yields
AudioChunks, raises RequestFailed for one request or EngineDead for all;
no private field of any engine is touched.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
import soundfile as sf

from omnicli.engine.request import AudioChunk, EngineDead, EngineStats, RequestFailed, RequestInfo
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.plan import RESULTS, plan_run
from omnicli.synth.results import SynthResult, SynthSummary
from omnicli.synth.run import SynthRun
from omnicli.synth.summary import build_synth_summary

SR = 8000


class FakeEngine:
    """Two chunks of 0.1 s per request; texts select a failure ("fail"), death ("die") or a hang ("hang")."""

    sample_rate = SR
    channels = 1
    model_name, device, startup_seconds = "fake", "cpu", 0.0  # what EngineLike declares
    resolved = None  # SynthRun is given the profile

    def __init__(self):
        self.seen: list[str] = []
        self.dead: str | None = None

    async def generate(self, request):
        self.seen.append(request.request_id)
        if self.dead or request.text == "die":
            self.dead = "codec stage stopped: RuntimeError('injected')"
            raise EngineDead(self.dead)
        if request.text == "hang":
            await asyncio.sleep(3600)
        for i in range(2):
            await asyncio.sleep(0.001)
            last = i == 1
            yield AudioChunk(
                np.full(SR // 10, 0.1, np.float32),
                last,
                time.perf_counter(),
                RequestInfo(ref_cache="none") if last else None,
            )
            if request.text == "fail":
                raise RequestFailed(request.request_id, "injected request fault", RequestInfo())

    def stats(self) -> EngineStats:
        return EngineStats()

    def write_run_files(self, run_dir) -> list:
        return []

    async def close(self) -> None:
        pass


def manifest(tmp_path, texts):
    (tmp_path / "meta.lst").write_text("".join(f"u{i}|||{t}\n" for i, t in enumerate(texts)))
    return read_manifest(tmp_path / "meta.lst")


def run_synth(tmp_path, texts, **kwargs):
    m = manifest(tmp_path, texts)
    out = tmp_path / "out"
    run = SynthRun(FakeEngine(), out, resolved=load_profile("cpu"), **kwargs)
    asyncio.run(run.run(plan_run(m, out).todo))
    rows = {r["utt"]: r for r in map(json.loads, (out / RESULTS).read_text().splitlines())}
    return m, out, run, rows


def test_rows_are_written_typed_and_a_failed_request_fails_alone(tmp_path):
    m, out, run, rows = run_synth(tmp_path, ["one", "fail", "two"], concurrency=2)
    assert {u: r["status"] for u, r in rows.items()} == {"u0": "ok", "u1": "failed", "u2": "ok"}
    assert rows["u1"]["error"] == "injected request fault" and "error" in rows["u1"]["flags"]
    assert sf.info(out / "u0.wav").frames == SR // 5 and not (out / "u1.wav").exists()
    for row in rows.values():
        SynthResult.model_validate(row)  # what was written reads back typed
    summary = build_synth_summary(m, out, run, resolved=load_profile("cpu"))
    assert isinstance(summary, SynthSummary) and (summary.num_ok, summary.num_failed, summary.num_pending) == (2, 1, 0)
    assert plan_run(m, out).done == ["u0", "u2"]
    # audio-s/s counts ok rows only; what the failed row produced before failing is shown apart
    assert summary.this_run.audio_seconds == pytest.approx(0.4)
    assert summary.this_run.failed_audio_seconds == pytest.approx(rows["u1"]["audio_seconds"])
    assert summary.this_run.audio_throughput == pytest.approx(0.4 / summary.this_run.wall_seconds, rel=0.01)


def test_an_engine_death_stops_the_run_and_leaves_rows_pending(tmp_path):
    m, out, run, rows = run_synth(tmp_path, ["one", "die", "hang", "four"], concurrency=1)
    assert isinstance(run.engine_error, EngineDead) and str(run.engine_error).startswith("codec stage stopped")
    assert list(rows) == ["u0"]  # the death is nobody's failure: nothing recorded for u1
    assert run.left_pending == ["u1"]
    assert [r.utt for r in plan_run(m, out).todo] == ["u1", "u2", "u3"]


def test_a_stop_leaves_requests_in_flight_pending_after_the_grace(tmp_path):
    m = manifest(tmp_path, ["one", "hang", "hang", "never"])
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
