"""`omni bench --ray`: merging N engines' results, the coordinator's faults, and a real 2-engine run.

The merge tests use hand-made records on purpose: each engine's times come
from its own clock, and pooled percentiles differ from averaged ones. The
Ray tests share one local cluster per module, started here with more CPUs
than the engines reserve; the coordinator tests run small fake engines inside
real Ray actors, the last test the real omni-tiny engine through the CLI.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from omnicli.benchmark.engines import EnginePass, EnginesPass, build_engines_run, merge_stats, merge_summaries
from omnicli.benchmark.metrics import summarize
from omnicli.benchmark.outputs.table import engine_tables
from omnicli.benchmark.outputs.text import text_lines
from omnicli.benchmark.report import as_run, build_document
from omnicli.benchmark.session import (
    BenchObserver,
    BenchPlan,
    BenchSession,
    EngineStartError,
    PassResult,
    ProfileRun,
    RoundResult,
)
from omnicli.cli import app
from omnicli.commands.json_schema import Kind, document_schema
from omnicli.driver import LoadShape, Prompt, RequestRecord
from omnicli.engine.request import EngineDead, EngineStats, TTSRequest
from tests import needs
from tests.conftest import REPO, TEST_PROFILE_SETS
from tests.fakes import FakeEngine, tiny_profile

SR = 1000
runner = CliRunner()


def record(
    utt: str, start: float, e2el: float, ttfp: float, *, samples: int = 1000, error: str | None = None
) -> RequestRecord:
    """A finished request: half its audio at start+ttfp, the rest at start+e2el."""
    return RequestRecord(
        utt=utt, request_id=utt, start=start, end=start + e2el, sample_rate=SR,
        chunk_times=[start + ttfp, start + e2el], chunk_samples=[samples // 2, samples - samples // 2], error=error,
    )


# Engine A's clock reads about 0, engine B's about 5000 (another process, another node).
ENGINE_A = [[record("a0", 0.0, 0.1, 0.05), record("a1", 0.0, 0.2, 0.05)]]
ENGINE_B = [[record("b0", 5000.0, 1.0, 0.5), record("b1", 5000.5, 2.0, 0.5), record("b2", 5001.0, 3.0, 0.5),
             record("b3", 5001.0, 0.5, 0.1, error="codec chunk over budget")]]


def test_merge_sums_each_engines_throughput_and_never_spans_two_clocks():
    merged = merge_summaries([ENGINE_A, ENGINE_B])
    a, b = summarize(ENGINE_A), summarize(ENGINE_B)
    assert (a["duration"], b["duration"]) == (pytest.approx(0.2), pytest.approx(4.0))
    # A: 2 s of audio in 0.2 s; B: 3 s in 4 s. Summed: 10.75 audio s/s (one span across both clocks would be ~5004 s).
    assert merged["audio_throughput"] == pytest.approx(2 / 0.2 + 3 / 4.0)
    assert merged["request_throughput"] == pytest.approx(2 / 0.2 + 3 / 4.0)
    assert merged["duration"] == pytest.approx(4.0) and merged["round_durations"] == [pytest.approx(4.0)]
    assert (merged["completed"], merged["failed"], merged["total_audio_duration_s"]) == (5, 1, pytest.approx(5.0))


def test_merged_percentiles_are_over_the_pooled_samples_not_a_mean_of_engines():
    merged = merge_summaries([ENGINE_A, ENGINE_B], percentiles=(50, 90))
    pooled_e2el = [0.1, 0.2, 1.0, 2.0, 3.0]  # the failed request is in no distribution
    assert merged["p50_e2el_ms"] == pytest.approx(1000 * np.percentile(pooled_e2el, 50)) == pytest.approx(1000.0)
    mean_of_medians = (summarize(ENGINE_A)["p50_e2el_ms"] + summarize(ENGINE_B)["p50_e2el_ms"]) / 2
    assert mean_of_medians == pytest.approx(1075.0) != merged["p50_e2el_ms"]
    assert merged["p90_audio_ttfp_ms"] == pytest.approx(1000 * np.percentile([0.05, 0.05, 0.5, 0.5, 0.5], 90))
    assert merged["mean_audio_rtf"] == pytest.approx(np.mean([0.1, 0.2, 1.0, 2.0, 3.0]))


def test_merged_round_durations_are_the_slowest_engine_per_round():
    a = [[record("a", 0.0, 1.0, 0.1)], [record("a", 10.0, 3.0, 0.1)]]
    b = [[record("b", 900.0, 2.0, 0.1)], [record("b", 910.0, 1.0, 0.1)]]
    merged = merge_summaries([a, b])
    assert merged["round_durations"] == [pytest.approx(2.0), pytest.approx(3.0)]
    assert merged["duration"] == pytest.approx(max(4.0, 3.0))  # each engine's own total: a 4 s, b 3 s
    assert merged["audio_throughput"] == pytest.approx(2 / 4.0 + 2 / 3.0)
    with pytest.raises(ValueError):
        merge_summaries([])


def test_merged_engine_stats_sum_rates_and_pool_codec_steps():
    a = EngineStats(talker_tokens=100, talker_time_s=1.0, codec_steps=10, codec_rows=20)
    b = EngineStats(talker_tokens=300, talker_time_s=1.0, codec_steps=30, codec_rows=30)
    merged = merge_stats([a, b])
    assert merged["talker_tokens"] == 400 and merged["talker_tokens_per_s"] == pytest.approx(400.0)  # not 400 / 2 s
    assert merged["mean_codec_batch_size"] == pytest.approx(50 / 40)  # not the mean of 2.0 and 1.0


def engine_pass(index: int, rounds, error: str | None = None) -> EnginePass:
    run = ProfileRun("cpu", tiny_profile("cpu"))
    result = None
    if error is None:
        result = PassResult(run, LoadShape(concurrency=2), [RoundResult(records=r) for r in rounds], SR, "fake", "cpu",
                            "2026-11-30T12:00:00+00:00", num_prompts=2, warmup_requests=1)
    return EnginePass(engine=index, node=f"node{index}", result=result, error=error)


def test_a_failed_engine_is_listed_with_its_error_and_left_out_of_the_totals():
    run_spec = ProfileRun("cpu", tiny_profile("cpu"))
    passed = EnginesPass(run_spec, LoadShape(concurrency=2), [
        engine_pass(0, ENGINE_A), engine_pass(1, None, error="codec stage stopped"), engine_pass(2, ENGINE_B),
    ])
    run = build_engines_run(passed, percentiles=(50, 99), detailed=True)
    assert passed.engine_error == "engine 1: codec stage stopped"
    assert run["num_engines"] == 3 and [e["engine_error"] for e in run["per_engine"]] == [
        None,
        "codec stage stopped",
        None,
    ]
    assert run["completed"] == 5 and run["warmup_requests"] == 2
    assert run["request_engines"] == [0, 0, 2, 2, 2, 2] and len(run["e2els"]) == 6
    assert [(f["utt"], f["engine"]) for f in run["failures"]] == [("b3", 2)]
    document = build_document(
        [run],
        "t0",
        (50, 99),
        engine_error=passed.engine_error,
        ray={"address": None, "engines": 3, "gpus_per_engine": 0.0, "cpus_per_engine": 1.0, "nodes": 3},
    )
    jsonschema.validate(json.loads(json.dumps(document.to_dict())), document_schema(Kind.bench))
    lines = text_lines([as_run(run)], (50, 99))
    assert "== cpu c=2 engine 1 ==" in lines and "Engine error: codec stage stopped" in lines
    assert lines[lines.index("== cpu c=2 engine 2 ==") + 1] == "Completed / failed: 3 / 1"
    (table,) = engine_tables([as_run(run)], (50, 99))
    assert [c.header for c in table.columns] == ["Metric", "engine 0", "engine 1", "engine 2", "total"]
    assert list(table.columns[2].cells)[0] == "failed" and list(table.columns[4].cells)[0] == "5 / 1"
    with pytest.raises(ValueError):
        build_engines_run(EnginesPass(run_spec, LoadShape(concurrency=2), [engine_pass(0, None, error="x")]))


def test_the_schema_describes_the_ray_entries():
    schema = document_schema(Kind.bench)
    assert {"num_engines", "per_engine"} <= set(schema["$defs"]["BenchRun"]["properties"])
    assert {"engine", "node", "engine_error"} <= set(schema["$defs"]["BenchEngineRun"]["required"])
    assert "ray" in schema["properties"]


# --- the command line, without a cluster ----------------------------------------


@pytest.mark.parametrize("args, named", [
    (["--engines", "2"], "--engines"),
    (["--ray", "--compare", "low_latency"], "--compare"),
    (["--ray", "--audio-out", "."], "--audio-out"),
    (["--ray", "--plot", "x.png"], "--plot"),
    (["--ray", "--save-result"], "--save-result"),
    (["--ray", "--engines", "0"], "--engines"),
])
def test_options_that_do_not_combine_with_ray_exit_2(args, named):
    result = runner.invoke(app, ["bench", "-n", "1", *args])
    assert result.exit_code == 2, result.output
    assert named in result.output


def test_without_ray_installed_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    result = runner.invoke(app, ["bench", "--ray", "--engines", "2", "-n", "1"])
    assert result.exit_code == 2
    assert 'pip install "omnicli[ray]"' in result.output


# --- the coordinator, on a local cluster --------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    ray = needs.module("ray", "ray is not installed (pip install 'omnicli[ray]')")
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield ray
    finally:
        ray.shutdown()


class ExitingEngine(FakeEngine):
    """Its actor's process exits at the first request, as one killed by the OOM killer."""

    async def generate(self, req):
        os._exit(1)
        yield  # an async generator, like the real one


async def fake_engines(engines: dict, resolved, index):
    """The engine of actor `index` as the test asks (`engines`: index -> FakeEngine kwargs)."""
    kwargs = dict(engines.get(index, {}))
    if kwargs.pop("fail_start", False):
        raise RuntimeError("no CUDA device 7 on this node")
    if kwargs.pop("exit", False):
        return ExitingEngine(**kwargs)
    return FakeEngine(**kwargs)


def fake_bench(ray, engines: dict, *, count: int = 2, texts=("one", "two", "three", "four"), shapes=(1, 2), **plan):
    """A session over a Ray pool of `count` fake engines (`engines`: index -> FakeEngine kwargs)."""
    from omnicli.driver.ray_pool import RayPool
    from omnicli.runtime.cluster import EngineResources

    run_spec = ProfileRun("fake", tiny_profile("fake"))
    prompts = [Prompt(f"u{i}", TTSRequest(request_id="", text=t, ref_text="r")) for i, t in enumerate(texts)]
    plan = BenchPlan(shapes=[LoadShape(concurrency=c) for c in shapes], **plan)
    pools = RayPool.factory(ray, EngineResources(engines=count), start_engine=functools.partial(fake_engines, engines),
                               poll_s=0.05)
    return BenchSession([run_spec], prompts, plan, pools)


def test_every_engine_runs_the_whole_load_and_the_warmup(ray_cluster):
    from omnicli.driver.ray_pool import ray_facts

    bench = fake_bench(ray_cluster, {}, warmup_requests=2, rounds=2)
    results = asyncio.run(bench.run())
    assert bench.engine_error is None and bench.unfinished is None
    assert [p.shape.concurrency for p in results] == [1, 2]
    for passed in results:
        run = build_engines_run(passed)
        assert [e["completed"] for e in run["per_engine"]] == [8, 8] and run[
            "completed"
        ] == 16  # 4 prompts x 2 rounds each
        assert run["rounds"] == 2 and len(run["round_durations"]) == 2
        assert [e["warmup_requests"] for e in run["per_engine"]] == (
            [2, 2] if passed.shape.concurrency == 1 else [0, 0]
        )
        ids = [r.request_id for e in passed.engines for rnd in e.result.rounds for r in rnd.records]
        assert len(set(ids)) == 16  # request ids name their engine and round
    from omnicli.runtime.cluster import EngineResources

    facts = ray_facts(None, EngineResources(engines=2), bench.facts)
    assert facts["nodes"] == 1 and facts["engines"] == 2


def test_an_engine_that_cannot_start_ends_the_run_before_any_round(ray_cluster):
    bench = fake_bench(ray_cluster, {1: {"fail_start": True}})
    with pytest.raises(
        EngineStartError, match=r"^engine 1 \(node \w+\) could not start: RuntimeError: no CUDA device 7"
    ):
        asyncio.run(bench.run())
    assert bench.results == []


def test_an_engine_that_dies_mid_round_is_reported_with_its_error_and_the_run_stops(ray_cluster):
    bench = fake_bench(ray_cluster, {1: {"die_after": 2}})
    results = asyncio.run(bench.run())
    assert str(bench.engine_error) == "engine 1: talker process exited"
    (passed,) = results  # the second load shape never ran
    run = build_engines_run(passed)
    assert [e["engine_error"] for e in run["per_engine"]] == [None, "talker process exited"]
    assert run["completed"] == 4  # engine 0's whole round; engine 1's partial round is not counted


def test_an_engine_whose_actor_process_dies_is_reported(ray_cluster):
    bench = fake_bench(ray_cluster, {0: {"exit": True}}, shapes=(2,))
    (passed,) = asyncio.run(bench.run())
    assert str(bench.engine_error).startswith("engine 0: the engine's Ray actor died")
    assert passed.engines[1].error is None and build_engines_run(passed)["completed"] == 4


def test_a_stop_drops_the_phase_in_progress(ray_cluster):
    bench = fake_bench(ray_cluster, {0: {"step": 0.3}, 1: {"step": 0.3}}, texts=["t"] * 6, shapes=(1,))
    bench.grace_s = 0.1
    seen = []

    class StopInTheRound(BenchObserver):
        def phase_start(self, description, total):
            seen.append(description)
            asyncio.get_running_loop().call_later(0.5, bench.stop.set)  # as a Ctrl-C during the round

        def phase_progress(self, done, failed, audio_seconds):
            seen.append(done)

    bench.observer = StopInTheRound()
    assert asyncio.run(bench.run()) == []
    assert bench.unfinished == "fake c1" and seen[0] == "fake c1"
    assert max(seen[1:]) < 12  # 6 prompts x 2 engines at about 1 s each: cut short


# --- the real engine ------------------------------------------------------------------


@pytest.mark.engine
def test_bench_ray_two_omni_tiny_engines_total_equals_the_engines(ray_cluster, tmp_path: Path):
    sets = [a for s in TEST_PROFILE_SETS for a in ("--set", s)]
    result = runner.invoke(app, [
        "bench", "--ray", "--engines", "2", "-n", "3", "-c", "2", "--warmup", "1", "--max-new-tokens", "40",
        "-p", "cpu", *sets, "--result-dir", str(tmp_path), "--result-filename", "r.json", "--save-detailed",
        "--format", "text",
    ])
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(document, document_schema(Kind.bench))
    assert document["ray"] == {
        "address": None,
        "engines": 2,
        "gpus_per_engine": 0.0,
        "cpus_per_engine": 1.0,
        "nodes": 1,
    }
    (run,) = document["runs"]
    engines = run["per_engine"]
    assert run["num_engines"] == 2 and [e["engine_error"] for e in engines] == [None, None]
    assert [e["completed"] for e in engines] == [3, 3] and run["completed"] == 6 and run["failed"] == 0
    assert [e["warmup_requests"] for e in engines] == [1, 1]
    # each engine's node facts come from its own actor (torch is loaded there, not in this coordinator)
    assert all(e["machine"]["torch_threads"] is not None for e in engines) and run["machine"] == engines[0]["machine"]
    for key in ("audio_throughput", "request_throughput", "talker_tokens_per_s", "total_audio_duration_s"):
        assert run[key] == pytest.approx(sum(e[key] for e in engines)), key
    assert run["duration"] == max(e["duration"] for e in engines)
    # latency samples pooled: the merged lists are the engines' lists, and the percentiles are theirs
    assert len(run["e2els"]) == sum(len(e["e2els"]) for e in engines) == 6
    assert sorted(run["e2els"]) == sorted(engines[0]["e2els"] + engines[1]["e2els"])
    assert run["p50_e2el_ms"] == pytest.approx(1000 * np.percentile(run["e2els"], 50))
    assert run["p99_audio_ttfp_ms"] == pytest.approx(1000 * np.percentile(run["audio_ttfps"], 99))
    assert run["mean_audio_rtf"] == pytest.approx(np.mean(run["audio_rtfs"]))
    assert "== cpu c=2 engine 1 ==" in result.stdout and "Completed / failed: 6 / 0" in result.stdout


# --- the command's own parts ------------------------------------------------------------


def test_the_bar_counts_each_request_of_all_engines_once():
    from omnicli.benchmark.entrypoint import BenchStop
    from omnicli.commands.bench_console import ConsoleObserver
    from omnicli.commands.interrupts import BenchInterrupts

    calls = []

    class Progress:
        def start(self, description, total):
            calls.append(("start", description, total))

        def done(self, *, failed, audio_seconds):
            calls.append((failed, round(audio_seconds, 6)))

        def end(self):
            calls.append("end")

    observer = ConsoleObserver(Progress(), BenchInterrupts(BenchStop(), graceful_start=True))
    observer.phase_start("cpu c2", 8)
    observer.phase_progress(2, 0, 1.6)
    observer.phase_progress(2, 0, 1.6)  # polled again, nothing new
    observer.phase_progress(5, 1, 3.1)
    observer.phase_progress(4, 1, 3.0)  # an engine that did not answer this poll: never counted down
    observer.phase_end()
    assert calls == [("start", "cpu c2", 8), (False, 0.8), (False, 0.8), (True, 0.5), (False, 0.5), (False, 0.5), "end"]


def test_a_first_signal_is_graceful_even_while_engines_start():
    import signal

    from omnicli.benchmark.entrypoint import BenchStop
    from omnicli.commands.interrupts import BenchInterrupts, Phase

    stop = BenchStop()
    interrupts = BenchInterrupts(stop, graceful_start=True)
    assert interrupts.phase is Phase.STARTING
    interrupts.on_first_signal(signal.SIGINT)  # a forced exit would end this test's process
    assert stop.requested and interrupts.interrupted


@pytest.mark.parametrize("outcome, message", [
    ("start", "error: engine 1 (node n1) could not start: RuntimeError: no CUDA device 7"),
    ("dead", "engine failed: engine 0: codec stage stopped"),
])
def test_engine_faults_exit_3_with_the_engines_error(ray_cluster, monkeypatch, outcome, message):
    async def run(self):  # the session's outcome, without starting engines (its own tests run them)
        if outcome == "start":
            raise EngineStartError("cpu", message="engine 1 (node n1) could not start: RuntimeError: no CUDA device 7")
        self.engine_error = EngineDead("engine 0: codec stage stopped")
        return self.results

    monkeypatch.setattr(BenchSession, "run", run)
    result = runner.invoke(app, ["bench", "--ray", "--engines", "2", "-n", "1"])
    assert result.exit_code == 3, result.output
    assert message in " ".join(result.output.split())
