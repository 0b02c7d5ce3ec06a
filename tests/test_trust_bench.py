"""Issue 31, `omni bench` inputs checked before the engine starts and resume edge cases: --extra-body
fields typed, --metadata that would spoil the per-run file, an --append-result target that is not a
result file, a multi-round run whose engine dies keeping what finished, the ramp-up floor, `{label}`
in --result-filename, --report's folder named in its error, and a resume whose engine cannot start
(the real command in-process; the engine is the fake of tests/test_bench_session.py)."""

from __future__ import annotations

import asyncio
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

import omnicli.benchmark.entrypoint as bench_entry
from omnicli.benchmark.session import BenchPlan, BenchSession, ProfileRun
from omnicli.benchmark.vllm_format import parse_metadata, run_filename
from omnicli.cli import app
from omnicli.driver import LoadShape
from omnicli.driver.pool import LocalPool
from omnicli.engine.request import EngineError, RequestFailed, TTSRequest
from omnicli.manifest import read_manifest
from omnicli.synth.plan import RESULTS, SUMMARY, input_digest
from tests.fakes import FakeEngine, make_manifest, prompts, tiny_profile

runner = CliRunner()


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def fake_engine(monkeypatch):
    async def start(resolved):
        return FakeEngine()

    monkeypatch.setattr(bench_entry, "start_engine", start)


# -- item 9: --extra-body fields are typed before the engine starts ------------------------------


@pytest.mark.parametrize(
    "name, value, ok",
    [
        ("seed", 7, True), ("seed", None, True), ("seed", -1, True), ("seed", "abc", False), ("seed", 1.5, False),
        ("seed", True, False), ("seed", 2**63, False), ("max_new_tokens", 5, True), ("max_new_tokens", 0, False),
        ("max_new_tokens", "5", False), ("max_new_tokens", 2**31, False), ("voice", "Vivian", True),
        ("voice", None, True), ("voice", 5, False), ("language", ["en"], False), ("instruct", {}, False),
        ("ref_text", "words", True), ("ref_text", None, False), ("text", b"x", False), ("ref_sample_rate", 0, False),
    ],
)
def test_each_request_field_takes_only_its_type(name, value, ok):
    from omnicli.engine.request import field_problem

    assert (field_problem(name, value) is None) is ok


def test_a_request_names_its_first_bad_field():
    from omnicli.engine.request import request_problem

    assert request_problem(TTSRequest("r", "hello", seed=3, voice="v")) is None
    assert request_problem(TTSRequest("r", "hello", seed="abc")).startswith("seed must be an integer")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"seed": "abc"}', "seed"),  # was: the engine core's input thread died, exit 3 after 120 s
        ('{"seed": 18446744073709551616}', "seed"),
        ('{"seed": 1.5}', "seed"),
        ('{"voice": 5}', "voice"),
        ('{"language": ["en"]}', "language"),
        ('{"instruct": {"a": 1}}', "instruct"),
        ('{"ref_text": null}', "ref_text"),
        ('{"max_new_tokens": "5"}', "max_new_tokens"),
        ('{"max_tokens": true}', "max_new_tokens"),
        ('{"temperature": "hot"}', "temperature"),  # was: named as `--set talker.temperature`
        ('{"top_k": 1.5}', "top_k"),
    ],
)
def test_an_extra_body_field_of_the_wrong_type_exits_2_naming_it(no_engine, body, field):
    result = runner.invoke(app, ["bench", "-n", "1", "--extra-body", body])
    text = words(result.output)
    assert result.exit_code == 2, text
    assert "--extra-body" in text and f"{field} must be" in text, text


def test_a_bad_request_that_reaches_the_native_engine_fails_that_request_alone():
    from omnicli.engine.engine import Engine

    engine = Engine.__new__(Engine)  # only what generate reads before anything reaches a stage
    engine._dead, engine._ids = None, iter(range(10))

    async def first_chunk():
        async for _ in engine.generate(TTSRequest("r1", "hello", seed="abc")):  # type: ignore[arg-type]
            pass

    with pytest.raises(RequestFailed, match="seed must be an integer"):
        asyncio.run(first_chunk())


def test_a_bad_request_that_reaches_vllm_omni_fails_that_request_alone():
    from omnicli.vllm_omni.engine import OmniEngine

    engine = OmniEngine.__new__(OmniEngine)
    engine._dead = None
    engine._builder = SimpleNamespace(build=lambda request: pytest.fail("a bad seed must not be built"))

    async def first_chunk():
        async for _ in engine.generate(TTSRequest("r1", "hello", seed=2**70)):
            pass

    with pytest.raises(RequestFailed, match="seed must be an integer"):
        asyncio.run(first_chunk())


def test_the_talker_refuses_a_seed_vllm_would_die_on():
    from omnicli.engine.talker import Talker

    class NoLLM:
        errored = False

        def generate(self, *args, **kwargs):
            raise AssertionError("a bad seed must not reach vLLM")

    talker = Talker(NoLLM(), [0], SimpleNamespace())  # type: ignore[arg-type]

    async def first_delta():
        async for _ in talker.generate("r#1", [1, 2], 5, "abc"):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match="seed must be an integer"):  # the engine fails this request only
        asyncio.run(first_delta())
    assert not talker.errored()


# -- item 10: --metadata cannot spoil the per-run file --------------------------------------------


def test_metadata_overriding_a_typed_key_with_a_wrong_type_exits_2_before_the_engine(no_engine):
    for pair, why in (("num_prompts=abc", "num_prompts is one of the result file's own keys"),
                      ("mean_e2el_ms=1", "statistics")):
        result = runner.invoke(app, ["bench", "-n", "1", "--save-result", "--metadata", pair])
        text = words(result.output)
        assert result.exit_code == 2 and "--metadata" in text and why in text, text


def test_metadata_may_add_keys_and_set_a_typed_key_to_a_value_of_its_type(fake_engine, tmp_path):
    assert parse_metadata(["num_prompts=12", "tp=1"]) == {"num_prompts": "12", "tp": "1"}
    result = runner.invoke(app, ["bench", "-n", "1", "--save-result", "--result-dir", str(tmp_path),
                                 "--result-filename", "r.json", "--metadata", "tp=1", "version=0.3"])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert (doc["tp"], doc["version"]) == ("1", "0.3")


# -- item 11: --append-result onto something that is not a result file ----------------------------


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p: p.write_bytes(b'{"a": "\xff"}'), "not utf-8 text"),
        (lambda p: p.write_text("not json at all"), "Expecting value"),
        (lambda p: p.write_text("[1, 2]"), "holds list"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.mkdir(), "is a folder"),
    ],
)
def test_append_result_onto_a_file_that_is_not_results_exits_2_before_the_engine(no_engine, tmp_path, make, why):
    target = tmp_path / "all.json"
    make(target)
    result = runner.invoke(app, ["bench", "-n", "1", "--append-result", "--result-dir", str(tmp_path),
                                 "--result-filename", "all.json"])
    text = words(result.output)
    assert result.exit_code == 2, text
    assert f"--append-result {target}" in text and why in text, text


def test_append_result_onto_result_objects_appends(fake_engine, tmp_path):
    target = tmp_path / "all.json"
    target.write_text('{"earlier": 1}')
    args = ["bench", "-n", "1", "--append-result", "--result-dir", str(tmp_path), "--result-filename", "all.json"]
    assert runner.invoke(app, args).exit_code == 0
    first, second = target.read_text().split("\n")
    assert json.loads(first) == {"earlier": 1} and json.loads(second)["completed"] == 1


# -- item 12: a multi-round run whose engine dies keeps what finished ------------------------------


def session_with(engine_kwargs, labels, plan, texts=("a", "b")):
    made = []

    async def start(profile):
        made.append(FakeEngine(**engine_kwargs.get(profile.name, {})))
        return made[-1]

    runs = [ProfileRun(label, tiny_profile(label)) for label in labels]
    return BenchSession(runs, prompts(list(texts)), plan, LocalPool.factory(start)), made


def test_an_engine_that_dies_in_round_2_keeps_round_1():
    plan = BenchPlan(shapes=[LoadShape(concurrency=1)], rounds=3)
    session, made = session_with({"a": {"die_after": 2}}, ("a",), plan)  # 2 prompts a round: round 2 dies
    with pytest.raises(EngineError):
        asyncio.run(session.run())
    assert [len(r.rounds) for r in session.results] == [1]  # was: [] (the finished round lost)
    assert session.unfinished == "a c1 round 2/3" and made[0].closed


def test_an_interleaved_run_whose_engine_dies_in_round_2_keeps_every_finished_round():
    plan = BenchPlan(shapes=[LoadShape(concurrency=1)], rounds=3, interleave=True)
    session, made = session_with({"b": {"die_after": 2}}, ("a", "b"), plan)  # A1 B1 A2 B2(dies)
    with pytest.raises(EngineError):
        asyncio.run(session.run())
    assert [(r.profile.label, len(r.rounds)) for r in session.results] == [("a", 2), ("b", 1)]  # was: []
    assert all(e.closed for e in made)


def test_bench_interleave_whose_engine_dies_in_round_2_writes_what_finished_with_the_error(monkeypatch, tmp_path):
    made = []

    async def start(resolved):
        made.append(FakeEngine(die_after=2 if len(made) == 1 else None))  # the second profile's engine dies
        return made[-1]

    monkeypatch.setattr(bench_entry, "start_engine", start)
    result = runner.invoke(app, ["bench", "-n", "2", "--profile", "cpu", "--compare", "cpu", "--interleave",
                                 "--rounds", "3", "--result-dir", str(tmp_path), "--result-filename", "r.json"])
    text = words(result.output)
    assert result.exit_code == 3 and "engine failed: talker process exited" in text, text
    doc = json.loads((tmp_path / "r.json").read_text())  # was: no file at all
    assert [(r["profile_label"], r["rounds"]) for r in doc["runs"]] == [("cpu", 2), ("cpu#2", 1)]
    assert "talker process exited" in doc["engine_error"] and doc["interrupted"] is False


def test_an_engine_that_cannot_start_leaves_a_result_file_with_the_error(monkeypatch, tmp_path):
    async def broken(resolved):
        raise EngineError("talker process exited during start-up")

    monkeypatch.setattr(bench_entry, "start_engine", broken)
    result = runner.invoke(app, ["bench", "-n", "2", "--result-dir", str(tmp_path), "--result-filename", "r.json"])
    assert result.exit_code == 3, result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["runs"] == [] and "talker process exited during start-up" in doc["engine_error"]


def test_a_run_that_fails_for_another_reason_still_writes_what_finished(fake_engine, monkeypatch, tmp_path):
    import omnicli.driver.pool as pool

    real, calls = pool.run_round, []

    async def breaks_in_round_2(*args, **kwargs):  # as a bug of our own would, past the engine's own checks
        calls.append(1)
        if len(calls) == 2:
            raise SystemError("a bug")
        return await real(*args, **kwargs)

    monkeypatch.setattr(pool, "run_round", breaks_in_round_2)
    result = runner.invoke(app, ["bench", "-n", "2", "--rounds", "3", "--result-dir", str(tmp_path),
                                 "--result-filename", "r.json"])
    assert isinstance(result.exception, SystemError), result.output  # not the engine's failure: not exit 3
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["rounds"] for r in doc["runs"]] == [1] and doc["engine_error"] == "SystemError: a bug"


# -- item 19: ramp-up floor, {label} in --result-filename, --report's folder, resume ---------------


@pytest.mark.parametrize("option", ["--ramp-up-start-rps", "--ramp-up-end-rps"])
def test_a_ramp_up_rate_below_the_floor_exits_2(no_engine, option):
    rates = {"--ramp-up-start-rps": "1", "--ramp-up-end-rps": "2", option: "1e-300"}
    result = runner.invoke(app, ["bench", "--ramp-up-strategy", "linear", *[x for kv in rates.items() for x in kv]])
    text = words(result.output)
    assert result.exit_code == 2 and option in text and "at least 0.001" in text, text


def test_fields_of_result_filename_are_names_not_paths():
    doc = {"max_concurrency": 4, "request_rate": "inf", "label": "team/a", "model_id": "org/m", "date": "d"}
    name = run_filename("{label}-{profile}-c{concurrency}.json", doc, profile_label="profiles/x.yaml",
                        one_file_per_run=False)
    assert name == "team_a-profiles_x.yaml-c4.json"  # was: team/a-profiles/x.yaml-c4.json (two subfolders)
    assert run_filename("{label}.json", {**doc, "label": ".."}, profile_label="", one_file_per_run=False) == "__.json"
    assert run_filename("runs/{label}.json", doc, profile_label="", one_file_per_run=False) == "runs/team_a.json"
    assert run_filename("c{concurrency:03d}.json", doc, profile_label="", one_file_per_run=False) == "c004.json"


def test_bench_report_into_a_read_only_folder_names_the_report(no_engine, read_only):
    page = read_only / "page.html"
    result = runner.invoke(app, ["bench", "-n", "1", "--report", str(page)])
    text = words(result.output)
    assert result.exit_code == 2, text
    assert f"--report {page}: cannot write into {read_only}" in text and "--result-dir" not in text, text


def test_a_resume_whose_engine_cannot_start_does_not_count_a_redone_row_ok(tmp_path, monkeypatch):
    import omnicli.engine.backends as backends

    manifest = make_manifest(tmp_path / "data", 3)
    rows = read_manifest(manifest).rows
    out = tmp_path / "out"
    out.mkdir()
    lines = []
    for row in rows:
        sf.write(out / f"{row.utt}.wav", np.zeros(12_000, np.float32), 24_000, subtype="PCM_16")
        lines.append({"utt": row.utt, "status": "ok", "line": row.line_no, "wav": f"{row.utt}.wav",
                      "audio_seconds": 0.5, "input_digest": input_digest(row), "profile_digest": "p1"})
    del lines[1]["input_digest"]  # u01: cannot tell what it was made from: redone
    (out / RESULTS).write_text("".join(json.dumps(line) + "\n" for line in lines))

    async def broken(resolved):
        raise EngineError("talker process exited during start-up")

    monkeypatch.setattr(backends, "start_engine", broken)
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(out), "--profile", "cpu"])
    assert result.exit_code == 3, result.output
    summary = json.loads((out / SUMMARY).read_text())
    assert (summary["num_ok"], summary["num_pending"]) == (2, 1)  # was: 3 ok, 0 pending
    assert summary["this_run"]["left_pending"] == ["u01"]  # was: []


@pytest.mark.engine
def test_a_bad_seed_fails_its_request_and_the_real_engine_serves_the_next(engine_harness):
    """The real vLLM talker: a string seed handed on would kill its engine core's input thread
    (every request then waits for the stage timeout); it fails that request only."""
    engine = engine_harness.engine

    async def attempt():
        with pytest.raises(RequestFailed, match="seed must be an integer"):
            async for _ in engine.generate(TTSRequest("bad-seed", "Hello there.", seed="abc")):  # type: ignore[arg-type]
                pass
        with pytest.raises(ValueError, match="seed must be an integer"):  # below the engine's own check too
            async for _ in engine.talker.generate("bad-seed#1", [1, 2, 3], 4, "abc"):
                pass
        return [c async for c in engine.generate(TTSRequest("after", "Hello there.", seed=1, max_new_tokens=8))]

    chunks = engine_harness.run(asyncio.wait_for(attempt(), 120))
    assert chunks[-1].is_last and chunks[-1].info is not None
    assert engine.fault() is None and not engine.talker.errored()
