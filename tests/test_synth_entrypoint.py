"""`omnicli.synth.synthesize` called from Python, with a small fake engine through the engine seam."""

from __future__ import annotations

import asyncio
import json

import pytest
import soundfile as sf

from omnicli.driver import LoadShape, Outcome, Prompt, RequestRecord, drive
from omnicli.engine.request import EngineDead, TTSRequest
from omnicli.manifest import Manifest
from omnicli.profile import load_profile
from omnicli.synth import RunPhase, StopRequest, SynthArgs, SynthJob, synthesize
from omnicli.synth import entrypoint as synth_entrypoint
from omnicli.synth.plan import RESULTS, SUMMARY
from tests.fakes import SR, FakeEngine, write_manifest


@pytest.fixture
def fake_engines(monkeypatch):
    """Every engine the run starts: a FakeEngine, started through `engine.backends.start_engine`."""
    started: list[FakeEngine] = []

    async def start_engine(resolved):
        engine = FakeEngine()
        engine.resolved = resolved
        started.append(engine)
        return engine

    monkeypatch.setattr("omnicli.engine.backends.start_engine", start_engine)
    return started


class Recorder:
    """A SynthObserver that remembers what it heard."""

    def __init__(self):
        self.phases: list[RunPhase] = []
        self.notes: list[str] = []
        self.results: list[str] = []
        self.total: int | None = None

    def phase_changed(self, phase):
        self.phases.append(phase)

    def note(self, message):
        self.notes.append(message)

    def warning(self, message):
        self.notes.append(message)

    def skipped(self, error):
        self.notes.append(f"skipped {error}")

    def waiting(self, message):
        import contextlib

        self.notes.append(message)
        return contextlib.nullcontext()

    def progress(self):
        import contextlib

        return contextlib.nullcontext()

    def progress_started(self, total):
        self.total = total

    def progress_note(self, message):
        self.notes.append(message)

    def result(self, result):
        self.results.append(result.utt)


def test_synthesize_from_python_writes_wavs_results_and_a_versioned_summary(tmp_path, fake_engines):
    manifest = write_manifest(tmp_path, ["One.", "fail", "Three.", "Four.", "Five."])
    out = tmp_path / "out"
    seen = Recorder()
    report = synthesize(SynthArgs(manifest, out, load_profile("cpu"), concurrency=2, limit=3), seen)
    summary = report.summary
    assert (summary.num_rows, summary.num_ok, summary.num_failed, summary.limit) == (3, 2, 1, 3)
    assert report.usage_error is None and summary.engine_error is None and not summary.interrupted
    assert sorted(p.name for p in out.glob("*.wav")) == ["u0.wav", "u2.wav"]
    assert sf.info(out / "u0.wav").frames == 3 * 100  # the fake: 3 chunks of 100 samples
    rows = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert sorted(r["utt"] for r in rows) == ["u0", "u1", "u2"]  # u3, u4 are past the --limit cut
    assert {r["utt"]: r["status"] for r in rows}["u1"] == "failed"
    written = json.loads((out / SUMMARY).read_text())
    assert next(iter(written)) == "schema_version" and written["schema_version"] == 1
    assert seen.phases == [RunPhase.STARTING, RunPhase.RUNNING, RunPhase.CLOSING, RunPhase.DONE]
    assert seen.total == 3 and sorted(seen.results) == ["u0", "u1", "u2"]
    assert len(fake_engines) == 1 and summary.model == "fake"


def test_limit_is_applied_once_and_out_is_tidied_once(tmp_path, fake_engines, monkeypatch):
    manifest = write_manifest(tmp_path, ["One.", "Two.", "Three."])
    cuts, tidies = [], []
    limited = Manifest.limited
    monkeypatch.setattr(Manifest, "limited", lambda self, n: cuts.append(n) or limited(self, n))
    tidy = synth_entrypoint.tidy_out_dir
    monkeypatch.setattr(synth_entrypoint, "tidy_out_dir", lambda out: tidies.append(out) or tidy(out))
    summary = synthesize(SynthArgs(manifest, tmp_path / "out", load_profile("cpu"), limit=2)).summary
    assert cuts == [2] and tidies == [tmp_path / "out"]
    assert summary.num_rows == 2 and summary.this_run.attempted == 2


def test_a_resume_with_nothing_to_do_starts_no_engine(tmp_path, fake_engines):
    manifest = write_manifest(tmp_path, ["One.", "Two."])
    args = SynthArgs(manifest, tmp_path / "out", load_profile("cpu"))
    synthesize(args)
    again = synthesize(args).summary
    assert len(fake_engines) == 1 and again.num_ok == 2 and again.this_run.attempted == 0


def test_a_redone_row_leaves_one_results_line_per_utterance(tmp_path, fake_engines):
    manifest = write_manifest(tmp_path, ["One.", "fail"])
    args = SynthArgs(manifest, tmp_path / "out", load_profile("cpu"))
    synthesize(args)
    write_manifest(tmp_path, ["One.", "Now fine."])  # u1 changed: redone
    synthesize(args)
    utts = [json.loads(line)["utt"] for line in (tmp_path / "out" / RESULTS).read_text().splitlines()]
    assert sorted(utts) == ["u0", "u1"]


def test_a_stop_set_before_the_run_admits_nothing_and_marks_the_summary_interrupted(tmp_path, fake_engines):
    manifest = write_manifest(tmp_path, ["One.", "Two."])
    stop = StopRequest()
    stop.set()
    summary = synthesize(SynthArgs(manifest, tmp_path / "out", load_profile("cpu")), stop=stop).summary
    assert summary.interrupted and summary.num_ok == 0 and summary.num_pending == 2


def test_an_engine_death_leaves_rows_pending_and_is_the_summary_engine_error(tmp_path, fake_engines):
    manifest = write_manifest(tmp_path, ["die", "Two."])
    summary = synthesize(SynthArgs(manifest, tmp_path / "out", load_profile("cpu"), concurrency=1)).summary
    assert summary.engine_error.startswith("codec stage stopped") and summary.num_pending == 2


def test_save_partial_writes_nothing_before_the_run_is_planned(tmp_path):
    job = SynthJob(SynthArgs(write_manifest(tmp_path, ["One."]), tmp_path / "out", load_profile("cpu")))
    job.save_partial()
    assert not (tmp_path / "out" / SUMMARY).exists()
    job.prepare()
    try:
        job.save_partial()
    finally:
        job.release()
    assert json.loads((tmp_path / "out" / SUMMARY).read_text())["interrupted"] is True


# -- the outcome of a request -----------------------------------------------------------------------


def test_a_record_built_with_an_error_has_failed():
    ok = RequestRecord("u", "id", 0.0, 1.0, SR)
    failed = RequestRecord("u", "id", 0.0, 1.0, SR, error="boom")
    assert (ok.outcome, ok.ok, ok.rejected) == (Outcome.OK, True, False)
    assert (failed.outcome, failed.ok, failed.rejected) == (Outcome.FAILED, False, False)
    assert Outcome.FAILED == "failed" and str(Outcome.LEFT_PENDING) == "left_pending"


def _drive(engine, prompts, **kwargs):
    return asyncio.run(drive(engine, prompts, LoadShape(concurrency=1), keep_pcm=True, **kwargs))


def test_drive_gives_each_request_one_outcome_and_engine_death_as_its_exception():
    def bad_input():
        from omnicli.driver.inputs import InputError

        raise InputError("meta.lst:3: reference audio: missing")

    prompts = [
        Prompt("ok", request=TTSRequest("ok", "Fine.")),
        Prompt("fail", request=TTSRequest("fail", "fail")),
        Prompt("bad", load=bad_input),
    ]
    result = _drive(FakeEngine(), prompts)
    outcomes = {r.utt: (r.outcome, r.error) for r in result.records}
    assert outcomes["ok"] == (Outcome.OK, None)
    assert outcomes["fail"] == (Outcome.FAILED, "codec chunk over budget")
    assert outcomes["bad"] == (Outcome.REJECTED, "meta.lst:3: reference audio: missing")
    assert [r.rejected for r in result.records if r.utt == "bad"] == [True]
    ok = next(r for r in result.records if r.utt == "ok")
    assert ok.finish_reason == "stop" and ok.ref_cache == "cold"  # the engine's RequestInfo, typed

    died = _drive(FakeEngine(), [Prompt("d", request=TTSRequest("d", "die"))])
    assert isinstance(died.engine_error, EngineDead) and died.engine_error.reason.startswith("codec stage stopped")


def test_run_round_re_raises_the_engine_death_it_was_given(monkeypatch):
    from omnicli.driver import pool

    dead = EngineDead("talker died")

    async def fake_drive(*args, **kwargs):
        from omnicli.driver import DriveResult

        return DriveResult(complete=False, engine_error=dead)

    monkeypatch.setattr(pool, "drive", fake_drive)
    with pytest.raises(EngineDead) as raised:
        asyncio.run(pool.run_round(FakeEngine(), [], LoadShape(), id_prefix="p"))
    assert raised.value is dead


# -- the record sink synth and bench share --------------------------------------------------------


def _record(utt, pcm, error=None):
    import numpy as np

    pcm = np.asarray(pcm, np.float32)
    return RequestRecord(utt, utt, 0.0, 1.0, SR, [1.0], [len(pcm)], error=error, pcm=pcm, text="Some text.")


def test_the_record_sink_judges_writes_then_retains_with_the_write_outcome(tmp_path):
    from omnicli.driver.record_sink import NO_AUDIO, RecordSink
    from omnicli.retention import Retainer

    retainer = Retainer(tmp_path / "kept")
    failures: list[str] = []

    def write_failed(path, exc):
        failures.append(path.name)
        return f"could not write {path}: {exc}"

    synth_like = RecordSink("synth", retainer=retainer, thresholds=None, profile_digest="d", require_audio=True,
                            write_failed=write_failed)
    empty = synth_like.keep(_record("e", []), tmp_path / "e.wav")
    assert (empty.error, empty.wav, empty.flags) == (NO_AUDIO, None, ["empty"]) and empty.retained is not None
    meta = json.loads(empty.retained.with_suffix(".json").read_text())
    assert (meta["status"], meta["error"], meta["command"]) == ("failed", NO_AUDIO, "synth")

    (tmp_path / "folder.wav").mkdir()  # a wav name taken by a folder: that one row's problem
    taken = synth_like.keep(_record("t", [0.999] * 400), tmp_path / "folder.wav")
    assert failures == ["folder.wav"] and taken.error.startswith("could not write") and taken.flags == ["clipped"]
    assert json.loads(taken.retained.with_suffix(".json").read_text())["output_wav"] is None

    bench_like = RecordSink("bench", retainer=None, thresholds=None, profile_digest="d")
    quiet = bench_like.keep(_record("q", []), tmp_path / "q.wav")
    assert quiet.error is None and quiet.wav is None and quiet.flags == ["empty"]  # ok, nothing to write
    fine = bench_like.keep(_record("f", [0.1] * 400), tmp_path / "f.wav")
    assert fine.wav == tmp_path / "f.wav" and fine.flags == [] and sf.info(fine.wav).frames == 400


def test_a_full_output_folder_stops_the_synth_row_before_anything_is_retained(tmp_path, monkeypatch):
    import errno

    from omnicli.manifest import read_manifest
    from omnicli.retention import Retainer
    from omnicli.synth.sink import OutputUnwritable, RowSink, prompt_for

    resolved = load_profile("cpu")
    (tmp_path / "meta.lst").write_text("u0|||Hello.\n")
    row = read_manifest(tmp_path / "meta.lst").rows[0]
    record = _record("u0", [0.999] * 400)  # clipped: retained, had the wav been written
    record.prompt = prompt_for(row, resolved)

    def disk_full(path, pcm, sr):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("omnicli.driver.record_sink.write_wav_atomic", disk_full)
    retainer = Retainer(tmp_path / "kept")
    with pytest.raises(OutputUnwritable, match="No space left"):
        RowSink(tmp_path / "out", resolved, retainer=retainer).finish(record)
    assert retainer.kept == 0 and not (tmp_path / "kept").exists()
