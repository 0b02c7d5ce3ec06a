"""Faults against the real shared engine, through SynthRun in-process (no CLI start-up to pay).

Faults the real engine never shows on demand (a stage raising, a stage
hanging) are injected by wrapping the talker's `generate` on the shared
engine for one test; monkeypatch puts everything back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.atomic import read_jsonl
from omnicli.engine import TTSRequest
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.retention import Retainer
from omnicli.synth.plan import RESULTS, plan_run
from omnicli.synth.run import SynthRun
from tests.conftest import DEMO_MANIFEST
from tests.fakes import results_by_utt, synth_on, write_manifest

pytestmark = pytest.mark.engine

PROMPT = DEMO_MANIFEST.parent / "prompts" / "heart_juice.wav"


def inject_into_talker(monkeypatch, engine, behaviour):
    """Wraps the talker's generate: `behaviour(rid)` returns None (run normally) or a coroutine to await instead."""
    real = engine.talker.generate

    async def generate(rid, prompt, max_tokens, seed):
        fault = behaviour(rid)
        if fault is not None:
            await fault
        async for delta in real(rid, prompt, max_tokens, seed):
            yield delta

    monkeypatch.setattr(engine.talker, "generate", generate)


def test_mixed_batch_bad_rows_fail_alone_and_are_retained(engine_harness, fresh_engine_state, tmp_path, monkeypatch):
    """Bad references, an over-long text and a request that errors inside a stage each end as one
    failed row with its reason; every other row is synthesized, and only suspect audio is retained."""
    engine = engine_harness.engine
    folder = tmp_path / "set"
    (folder / "prompts").mkdir(parents=True)
    manifest = write_manifest(folder, extra=[
        "plain|||Short and fine.",
        "ref|The birch canoe.|prompts/demo.wav|With a real reference.",
        "stereo|Stereo.|prompts/stereo8k.wav|With a stereo reference at eight kilohertz.",
        "emptyref|x|prompts/empty.wav|Empty reference.",
        "corruptref|x|prompts/corrupt.wav|Corrupt reference.",
        f"toolong|||{'x' * (engine.adapter.max_text_bytes + 1)}",
        "boom|||This request fails inside the talker.",
    ])
    (folder / "prompts" / "demo.wav").write_bytes(PROMPT.read_bytes())
    demo, demo_sr = sf.read(PROMPT, dtype="float32")
    sf.write(folder / "prompts" / "stereo8k.wav", np.stack([demo, demo], axis=1)[::2], demo_sr // 2)
    (folder / "prompts" / "empty.wav").write_bytes(b"")
    (folder / "prompts" / "corrupt.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEjunkjunkjunk")

    def boom(rid):
        return _raise(RuntimeError("injected stage fault")) if rid.startswith("boom#") else None

    inject_into_talker(monkeypatch, engine, boom)
    out, kept = tmp_path / "out", tmp_path / "kept"
    run = synth_on(engine_harness, manifest, out, concurrency=4, retainer=Retainer(kept))

    rows = results_by_utt(out)
    assert set(rows) == {"plain", "ref", "stereo", "emptyref", "corruptref", "toolong", "boom"}
    assert run.engine_error is None and engine.fault() is None
    for utt in ("plain", "ref", "stereo"):
        assert rows[utt]["status"] == "ok" and rows[utt]["flags"] == [], rows[utt]
        assert sf.info(out / f"{utt}.wav").frames == round(rows[utt]["audio_seconds"] * engine.sample_rate)
    assert rows["stereo"]["ref_cache"] == "cold"
    where = f"{manifest}:"
    assert rows["emptyref"]["error"].startswith(f"{where}4: reference audio:") and "empty" in rows["emptyref"]["error"]
    assert (
        rows["corruptref"]["error"].startswith(f"{where}5: reference audio:")
        and "unreadable" in rows["corruptref"]["error"]
    )
    assert "accepts at most" in rows["toolong"]["error"] and rows["toolong"]["line"] == 6
    assert "injected stage fault" in rows["boom"]["error"]
    for utt in ("emptyref", "corruptref", "toolong", "boom"):
        assert rows[utt]["status"] == "failed" and not (out / f"{utt}.wav").exists()

    # Retained: the requests that failed in the engine (not the rows whose input never became a request).
    assert rows["emptyref"]["retained"] is None and rows["plain"]["retained"] is None
    sidecars = [json.loads(p.read_text()) for p in sorted(kept.glob("failed_speech_*.json"))]
    # "toolong" and "boom" both delivered no audio: same sha, one file, two occurrences.
    assert len(sidecars) == 1 and len(list(kept.glob("*.wav"))) == 1
    record = sidecars[0]
    assert record["reasons"] == ["error", "empty"]
    assert sorted(o["utt"] for o in record["occurrences"]) == ["boom", "toolong"]
    assert record["audio_sha256"] == hashlib.sha256(b"").hexdigest()
    assert record["wav"] == f"failed_speech_{record['audio_sha256'][:16]}.wav"
    for occurrence in record["occurrences"]:
        for key in ("utt", "text", "expected_text", "reference_wav", "error", "timings", "profile_digest", "reasons"):
            assert key in occurrence, key
        assert occurrence["profile_digest"] == engine.resolved.digest and occurrence["error"]


def test_thresholds_from_the_profile_flag_suspect_successes(engine_harness, tmp_path, monkeypatch):
    """`--set retention.*` reaches the judgement: a success is kept with its reasons and stays ok."""
    engine = engine_harness.engine
    strict = load_profile(
        "cpu",
        overrides=["retention.near_silent_dbfs=0", "retention.too_long_min_s=0", "retention.too_long_s_per_char=0.001"],
    )
    monkeypatch.setattr(engine.profile, "retention", strict.profile.retention)
    manifest = write_manifest(tmp_path / "set", extra=["quiet|||Judged by strict thresholds."])
    out, kept = tmp_path / "out", tmp_path / "kept"
    synth_on(engine_harness, manifest, out, retainer=Retainer(kept))
    row = results_by_utt(out)["quiet"]
    assert row["status"] == "ok" and row["flags"] == ["near_silent", "too_long"]
    wav, _ = sf.read(kept / Path(row["retained"]).name, dtype="float32")
    pcm_out, _ = sf.read(out / "quiet.wav", dtype="float32")
    assert len(wav) == len(pcm_out) and np.allclose(wav, pcm_out, atol=1 / 32768)  # the judged audio itself


def test_token_cap_gives_hit_cap_and_empty_audio_is_a_failure(engine_harness, tmp_path):
    manifest = write_manifest(
        tmp_path / "set",
        extra=["capped|||A sentence long enough to be cut short.", "nothing|||Too few tokens for one frame."],
    )
    out, kept = tmp_path / "out", tmp_path / "kept"
    parsed = read_manifest(manifest)
    capped = SynthRun(engine_harness.engine, out, max_new_tokens=12, retainer=Retainer(kept))
    engine_harness.run(capped.run(parsed.rows[:1]))
    nothing = SynthRun(engine_harness.engine, out, max_new_tokens=3, retainer=Retainer(kept))
    engine_harness.run(nothing.run(parsed.rows[1:]))
    rows = results_by_utt(out)
    assert rows["capped"]["status"] == "ok" and rows["capped"]["finish_reason"] == "length"
    assert rows["capped"]["flags"] == ["hit_cap"]
    assert rows["nothing"]["status"] == "failed" and rows["nothing"]["error"] == "the engine returned no audio"
    assert rows["nothing"]["flags"] == ["empty", "hit_cap"]
    assert len(list(kept.glob("failed_speech_*.wav"))) == 2


def test_retention_io_error_is_reported_and_does_not_mask_the_failure(engine_harness, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the retention folder should be")
    manifest = write_manifest(tmp_path / "set", extra=[f"long|||{'y' * 600}"])
    out = tmp_path / "out"
    retainer = Retainer(blocker / "kept")
    synth_on(engine_harness, manifest, out, retainer=retainer)
    row = results_by_utt(out)["long"]
    assert row["status"] == "failed" and "accepts at most" in row["error"]  # the original failure
    assert row["retained"] is None and "could not retain" in row["retention_error"]
    assert retainer.errors == 1


def test_an_output_wav_that_cannot_be_written_fails_its_row_only(engine_harness, tmp_path):
    manifest = write_manifest(tmp_path / "set", extra=["blocked|||Cannot be saved.", "fine|||Saved."])
    out = tmp_path / "out"
    (out / "blocked.wav").mkdir(parents=True)  # a folder where the wav should go
    synth_on(engine_harness, manifest, out, concurrency=2)
    rows = results_by_utt(out)
    assert rows["blocked"]["status"] == "failed" and "could not write" in rows["blocked"]["error"]
    assert rows["fine"]["status"] == "ok"


def test_results_that_cannot_be_recorded_stop_the_run_and_leave_rows_pending(engine_harness, tmp_path, monkeypatch):
    import errno

    from omnicli import atomic

    def disk_full(self, row):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.JsonlAppender, "append", disk_full)
    manifest = write_manifest(tmp_path / "set", extra=[f"d{i}|||Disk full {i}." for i in range(3)])
    run = SynthRun(engine_harness.engine, tmp_path / "out", concurrency=1)
    engine_harness.run(run.run(read_manifest(manifest).rows))
    assert run.results == []  # nothing claimed as done
    assert "results.jsonl: [Errno 28] No space left on device" in run.output_error
    assert run.left_pending == ["d0"]  # the one that could not be recorded; d1, d2 never started


def test_disk_full_stops_the_run_leaves_rows_pending_and_a_rerun_finishes_them(engine_harness, tmp_path, small_fs):
    # Was: the run went on, recorded every later row as failed, and a re-run said "0 to do".
    from tests.conftest import fill_up

    texts = [f"d{i}|||Row {i}." for i in range(8)]  # about 20 KB of wav each
    manifest = read_manifest(write_manifest(tmp_path / "set", extra=texts))
    out = small_fs / "out"
    out.mkdir()
    filler = fill_up(small_fs, leave=50_000)  # room for a couple of wavs, not for eight
    run = SynthRun(engine_harness.engine, out, concurrency=2)
    engine_harness.run(run.run(plan_run(manifest, out).todo))
    assert run.output_error and "No space left on device" in run.output_error
    rows = read_jsonl(out / RESULTS)
    assert all(r["status"] == "ok" for r in rows) and 1 <= len(rows) < 8  # no row blamed for the disk
    assert (out / RESULTS).read_bytes().endswith(b"\n") and not list(out.glob(".*.tmp"))
    plan = plan_run(manifest, out)
    assert plan.failed_before == [] and len(plan.done) == len(rows) and len(plan.todo) == 8 - len(rows)

    filler.unlink()  # space freed: a plain re-run finishes the rest
    again = SynthRun(engine_harness.engine, out, concurrency=2)
    engine_harness.run(again.run(plan.todo))
    assert again.output_error is None
    assert sorted(r["utt"] for r in read_jsonl(out / RESULTS) if r["status"] == "ok") == sorted(
        r.utt for r in manifest.rows
    )


def test_a_request_that_waits_longer_than_the_stage_timeout_while_others_stream_still_finishes(
    engine_harness, fresh_engine_state, monkeypatch
):
    # A request queued behind a full batch gets no audio for a long time while
    # the engine makes progress: that is load, not a hung stage, and must not fail.
    # Held by construction, whatever the machine's speed or load (it failed once at load 8-15: 3 s
    # of wall time passed with no output and the watchdog declared the engine dead). The stall
    # watchdog's clock here moves only with deliveries: STEP (within the stage timeout) per chunk
    # delivered to any request, so the engine is never idle by it while others stream, and the late
    # request is held in the talker until that clock has passed twice the stage timeout. A streamer
    # also pauses longer than the stage timeout in wall time, as on a loaded machine: only the
    # watchdog's own clock may count, never the wall's. Once released the late request is an
    # ordinary request, so the timeout is lifted for the rest.
    from omnicli.engine.engine import WATCHDOG_PERIOD_S

    engine = engine_harness.engine
    timeout_s = 3.0
    monkeypatch.setattr(engine.profile, "stage_timeout_s", timeout_s)
    router = engine._outputs
    delivered = [0.0]
    step = 0.75 * timeout_s
    real_put = router.put

    def counting_put(rid, value):
        delivered[0] += step
        real_put(rid, value)

    monkeypatch.setattr(router, "put", counting_put)
    monkeypatch.setattr(router, "_clock", lambda: delivered[0])
    monkeypatch.setattr(router, "last_delivery", 0.0)
    released = asyncio.Event()
    paused_s = timeout_s + 2 * WATCHDOG_PERIOD_S

    def behaviour(rid):
        if rid.startswith("late#"):
            return released.wait()
        return asyncio.sleep(paused_s) if rid.startswith("streamer1#") else None

    inject_into_talker(monkeypatch, engine, behaviour)

    async def scenario():
        streamed = 0

        async def keep_streaming():
            nonlocal streamed
            i = 0
            while not released.is_set():
                async for _ in engine.generate(TTSRequest(f"streamer{i}", "z" * 200)):
                    streamed += 1
                i += 1

        streaming = asyncio.create_task(keep_streaming())
        while streamed == 0 and not streaming.done():
            await asyncio.sleep(0.05)
        late = asyncio.create_task(_drain(engine.generate(TTSRequest("late", "Answered late."))))
        t0 = delivered[0]
        phase.append("late submitted")
        while delivered[0] - t0 <= 2 * timeout_s and not late.done() and not streaming.done():
            await asyncio.sleep(0.05)
        held, chunks_meanwhile = delivered[0] - t0, streamed
        assert not late.done() and not streaming.done()  # waited past the stage timeout, and was not failed
        engine.profile.stage_timeout_s = 300.0
        released.set()
        phase.append("late released")
        result = await late
        phase.append("late finished")
        await streaming
        return result, chunks_meanwhile, held

    phase: list[str] = []
    try:  # a bound against a hang only: the rule holds at any speed
        late_chunks, chunks_meanwhile, held = engine_harness.run(scenario(), timeout=1200)
    except TimeoutError:
        pytest.fail(f"not finished in 1200 s: {phase}, watchdog clock {delivered[0]}, fault {engine.fault()}")
    assert late_chunks and chunks_meanwhile >= 2 and held > 2 * timeout_s
    assert engine.fault() is None


def test_an_engine_that_stops_responding_stops_the_run_and_leaves_rows_pending(
    engine_harness, fresh_engine_state, tmp_path, monkeypatch
):
    engine = engine_harness.engine
    monkeypatch.setattr(engine.profile, "stage_timeout_s", 1.0)
    inject_into_talker(monkeypatch, engine, lambda rid: asyncio.sleep(3600))  # every request hangs
    manifest = write_manifest(tmp_path / "set", extra=[f"h{i}|||Hanging {i}." for i in range(4)])
    out = tmp_path / "out"
    run = synth_on(engine_harness, manifest, out, concurrency=2)
    assert "stopped responding" in str(run.engine_error) and "stage_timeout_s=1" in str(run.engine_error)
    assert sorted(run.left_pending) == ["h0", "h1"]  # h2, h3 were never admitted
    assert read_jsonl(out / RESULTS) == []  # nothing recorded as failed: a resume retries all four
    assert [r.utt for r in plan_run(read_manifest(manifest), out).todo] == ["h0", "h1", "h2", "h3"]


def test_stop_cancels_in_flight_after_the_grace_and_leaves_them_pending(engine_harness, tmp_path, monkeypatch):
    long_text = "A much longer sentence that keeps the talker and the codec busy for a good while. " * 2
    lines = ["s0|||Quick one."] + [f"s{i}|||{long_text}" for i in range(1, 6)]
    manifest = write_manifest(tmp_path / "set", extra=lines)
    out = tmp_path / "out"
    run: SynthRun

    def stop_after_first(result) -> None:
        run.stop.set()  # runs on the engine's loop

    # s1 and s2 are held in the talker until cancelled, so they are in flight when s0 ends
    # whatever the machine's speed.
    inject_into_talker(
        monkeypatch, engine_harness.engine, lambda rid: asyncio.sleep(3600) if rid.startswith(("s1#", "s2#")) else None
    )
    run = SynthRun(engine_harness.engine, out, concurrency=3, grace_s=0.0, on_result=stop_after_first)
    engine_harness.run(run.run(read_manifest(manifest).rows))
    rows = read_jsonl(out / RESULTS)
    assert [(r["utt"], r["status"]) for r in rows] == [("s0", "ok")]
    recorded = {r["utt"] for r in rows}
    assert sorted(run.left_pending) == ["s1", "s2"]  # in flight when stopped; s3-s5 never admitted
    assert sorted(p.stem for p in out.glob("*.wav")) == sorted(recorded)  # no partial wav for cancelled ones
    assert not list(out.glob(".*.tmp"))
    plan = plan_run(read_manifest(manifest), out)
    assert sorted(plan.done) == sorted(recorded) and len(plan.todo) == 6 - len(recorded)


async def _raise(exc: BaseException) -> None:
    raise exc


async def _drain(gen) -> list:
    return [chunk async for chunk in gen]
