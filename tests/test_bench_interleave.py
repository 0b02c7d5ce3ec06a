"""`omni bench --interleave`: round order, engines kept warm or restarted per round, per-round
figures and the b/a ratios with their interval, against the fake engine of test_bench_session
(this component only)."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from omnicli.benchmark.outputs.table import interleaved_tables
from omnicli.benchmark.outputs.text import text_lines
from omnicli.benchmark.report import ROUND_KEYS, build_document, build_run, round_ratios
from omnicli.benchmark.result_models import BenchRoundFigures
from omnicli.benchmark.session import BenchPlan, EngineStartError
from omnicli.driver import LoadShape
from omnicli.driver.pool import LocalPool
from tests.fakes import FakeEngine, Recorder, StopAt, run_stopped, session_for


class Tracker(Recorder):
    """Also records engine starts and closes, in order with the rounds."""

    def engine_starting(self, run):
        self.events.append(("start", run.label))

    def engine_closing(self, run):
        self.events.append(("close", run.label))

    def round_done(self, run, shape, index, result, engine):
        super().round_done(run, shape, index, result, engine)
        self.events.append(("round", run.label, shape.label, index))


def rendered(table) -> str:
    console = Console(file=io.StringIO(), width=240, color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_rounds_alternate_between_profiles_on_engines_kept_warm():
    engines, obs = [], Tracker()
    plan = BenchPlan(
        shapes=[LoadShape(concurrency=2), LoadShape(concurrency=4)], rounds=3, warmup_requests=1, interleave=True
    )
    results = asyncio.run(session_for(engines, ["a"] * 4, plan, labels=("a", "b"), observer=obs).run())
    assert len(engines) == 2 and all(e.closed for e in engines)  # one engine per profile, both closed at the end
    order = [e for e in obs.events if e[0] in ("start", "close", "round")]
    rounds = [(label, shape, r) for shape in ("c2", "c4") for r in range(3) for label in ("a", "b")]
    assert order == [("start", "a"), ("start", "b"), *(("round", *x) for x in rounds), ("close", "a"), ("close", "b")]
    assert [(r.profile.label, r.shape.label, len(r.rounds)) for r in results] == [
        ("a", "c2", 3), ("b", "c2", 3), ("a", "c4", 3), ("b", "c4", 3)]
    assert all(r.interleaved and not r.engine_restarts for r in results)
    assert [r.warmup_requests for r in results] == [1, 1, 0, 0]  # each engine's warmup, before its first pass only
    assert all(rnd.load is not None and rnd.load >= 0 for r in results for rnd in r.rounds)


def test_without_interleave_profiles_run_one_after_the_other_and_files_are_unchanged():
    engines, obs = [], Tracker()
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)], rounds=2)
    results = asyncio.run(session_for(engines, ["a"] * 3, plan, labels=("a", "b"), observer=obs).run())
    order = [e for e in obs.events if e[0] in ("start", "close", "round")]
    assert order == [("start", "a"), ("round", "a", "c2", 0), ("round", "a", "c2", 1), ("close", "a"),
                     ("start", "b"), ("round", "b", "c2", 0), ("round", "b", "c2", 1), ("close", "b")]
    runs = [build_run(r) for r in results]
    assert not any({"interleaved", "per_round", "engine_restarts"} & set(run.to_dict()) for run in runs)
    assert "interleaved" not in build_document(runs, "now").to_dict()["comparisons"][0]
    assert interleaved_tables(runs) == []


def test_an_engine_that_cannot_start_beside_the_other_turns_into_one_engine_per_round():
    engines, obs, open_now = [], Tracker(), []

    async def start(profile):  # room for one engine at a time
        if open_now:
            raise RuntimeError("not enough memory for a second engine")
        engine = FakeEngine()
        closing = engine.close

        async def close():
            open_now.remove(engine)
            await closing()

        engine.close = close
        open_now.append(engine)
        engines.append(engine)
        return engine

    session = session_for(
        [],
        ["a"] * 3,
        BenchPlan(shapes=[LoadShape(concurrency=2)], rounds=3, warmup_requests=2, interleave=True),
        labels=("a", "b"),
        observer=obs,
    )
    session.pools = LocalPool.factory(start)
    results = asyncio.run(session.run())
    assert len(engines) == 1 + 6 and all(e.closed for e in engines) and not open_now  # the warm one, then one per round
    warnings = [e[1] for e in obs.events if e[0] == "warning"]
    assert (
        len(warnings) == 1 and "'b' failed to start" in warnings[0] and "started for each of its rounds" in warnings[0]
    )
    rounds = [e[1:] for e in obs.events if e[0] == "round"]
    assert rounds == [(label, "c2", r) for r in range(3) for label in ("a", "b")]
    assert all(r.engine_restarts and len(r.rounds) == 3 for r in results)
    assert all(len([i for i in e.seen if "warmup" in i]) == 2 for e in engines[1:])  # every fresh engine is warmed up
    assert build_run(results[0]).engine_restarts is True


def test_a_first_engine_that_cannot_start_is_an_error_not_a_fallback():
    async def start(profile):
        raise RuntimeError("no such model")

    session = session_for([], ["a"], BenchPlan(shapes=[LoadShape()], rounds=3, interleave=True), labels=("a", "b"))
    session.pools = LocalPool.factory(start)
    with pytest.raises(EngineStartError, match="'a'.*no such model"):
        asyncio.run(session.run())


def test_stop_keeps_each_profiles_finished_rounds_and_closes_both_engines():
    engines = []
    stopper = StopAt("b c2 round 2/3", 0.01)
    plan = BenchPlan(shapes=[LoadShape(concurrency=2)], rounds=3, interleave=True)
    session = session_for(engines, ["a"] * 4, plan, labels=("a", "b"), observer=stopper)
    run_stopped(session, stopper)
    assert all(e.closed and e.in_flight == 0 for e in engines)
    assert [(r.profile.label, len(r.rounds)) for r in session.results] == [("a", 2), ("b", 1)]
    assert session.unfinished == "b c2 round 2/3"


def test_per_round_figures_and_ratio_with_interval_in_the_file_table_and_text():
    engines = []
    plan = BenchPlan(shapes=[LoadShape(concurrency=4)], rounds=3, interleave=True)
    # b's chunks come 8x slower: a difference no load on the machine hides
    session = session_for(engines, ["a"] * 4, plan, labels=("a", "b"),
                          engine_kwargs={"a": {"step": 0.01}, "b": {"step": 0.08}})
    runs = [build_run(r) for r in asyncio.run(session.run())]
    for run in runs:
        assert run.interleaved is True and run.engine_restarts is False
        assert [f.round for f in run.per_round] == [0, 1, 2]
        for figures, duration in zip(run.per_round, run.round_durations):
            assert figures.audio_throughput == pytest.approx(4 * 0.3 / duration)  # 4 requests of 0.3 s audio
            assert figures.mean_audio_ttfp_ms <= figures.p99_audio_ttfp_ms <= figures.mean_e2el_ms * 1.01
    (comparison,) = build_document(runs, "now").to_dict()["comparisons"]  # validated against BenchDocument
    by_metric = {e["metric"]: e for e in comparison["interleaved"]}
    assert list(by_metric) == list(ROUND_KEYS)
    speed = by_metric["audio_throughput"]
    assert speed["a_rounds"] == speed["b_rounds"] == 3
    assert speed["ratio"] == pytest.approx(speed["b_median"] / speed["a_median"])
    assert speed["low"] <= speed["ratio"] <= speed["high"] < 1.0 and speed["measured"] is True
    assert by_metric["mean_e2el_ms"]["low"] > 1.0 and by_metric["mean_e2el_ms"]["measured"] is True
    table = rendered(interleaved_tables(runs)[0])
    assert "A/B interleaved - c=4" in table and "3 / 3 rounds" in table and "load average" in table
    assert f"{speed['ratio']:.2f}x (90% interval {speed['low']:.2f}-{speed['high']:.2f})" in table
    lines = text_lines(runs, (99,))
    assert "== interleaved b/a c=4 ==" in lines
    assert any(line.startswith("Audio throughput (audio s/s): ") and speed["summary"] in line for line in lines)


def rounds_of(values, key="audio_throughput"):
    """A run's `per_round` with `key` taking `values` (the other figures unknown)."""
    return [
        BenchRoundFigures(round=i, load_avg=1.0, **{**dict.fromkeys(ROUND_KEYS), key: v}) for i, v in enumerate(values)
    ]


def test_an_interval_that_spans_one_is_no_difference_measured():
    (entry,) = [e for e in round_ratios(rounds_of([1.0, 1.2, 0.9]), rounds_of([1.1, 0.95, 1.05]))
                if e["metric"] == "audio_throughput"]
    assert entry["low"] < 1.0 < entry["high"] and entry["measured"] is False
    assert entry["summary"].startswith("no difference measured (")
    assert (entry["a_median"], entry["a_min"], entry["a_max"]) == (1.0, 0.9, 1.2)


def test_fewer_than_three_rounds_give_a_ratio_and_no_interval():
    (entry,) = [
        e for e in round_ratios(rounds_of([1.0, 2.0]), rounds_of([3.0, 3.0])) if e["metric"] == "audio_throughput"
    ]
    assert entry["ratio"] == pytest.approx(2.0) and entry["low"] is None and entry["measured"] is None
    assert entry["summary"] == "2.00x, no interval (2 round(s); 3 needed)"
    # a metric no round has a figure for (all requests failed): said so, no ratio
    (ttfp,) = [
        e for e in round_ratios(rounds_of([1.0, 2.0]), rounds_of([3.0, 3.0])) if e["metric"] == "mean_audio_ttfp_ms"
    ]
    assert ttfp["ratio"] is None and ttfp["summary"].startswith("no ratio")


@pytest.mark.engine
def test_cli_interleave_two_profiles_three_rounds_on_the_shared_engine(engine_harness, monkeypatch, tmp_path):
    import json

    from typer.testing import CliRunner

    import omnicli.benchmark.entrypoint as bench_entry
    from omnicli.cli import app
    from tests.fakes import CrossLoopEngine

    starts = []

    async def start(resolved):  # each profile gets the session's engine (closing stays the fixture's)
        starts.append(resolved.name)
        return CrossLoopEngine(engine_harness)

    monkeypatch.setattr(bench_entry, "start_engine", start)
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "-p",
            "cpu",
            "--compare",
            "cpu",
            "--interleave",
            "--rounds",
            "3",
            "-n",
            "2",
            "-c",
            "2",
            "--max-new-tokens",
            "16",
            "--format",
            "text",
            "--result-dir",
            str(tmp_path),
            "--result-filename",
            "ab.json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert starts == ["cpu", "cpu"]  # both engines started before the first round, kept for all six
    assert "rounds alternating between the profiles" in result.output
    lines = result.output.splitlines()
    block = lines[lines.index("== interleaved cpu#2/cpu c=2 ==") + 1:]
    assert [line.split(":")[0] for line in block[:6]] == [
        "Audio throughput (audio s/s)",
        "Request throughput (req/s)",
        "Mean TTFP (ms)",
        "P99 TTFP (ms)",
        "Mean E2EL (ms)",
        "Mean RTF",
    ]
    doc = json.loads((tmp_path / "ab.json").read_text())
    assert [len(run["per_round"]) for run in doc["runs"]] == [3, 3]
    assert all(f["audio_throughput"] > 0 and f["load_avg"] is not None for run in doc["runs"] for f in run["per_round"])
    (comparison,) = doc["comparisons"]
    for entry in comparison["interleaved"]:
        assert entry["a_rounds"] == entry["b_rounds"] == 3 and entry["low"] <= entry["ratio"] <= entry["high"]
        assert entry["summary"] in "\n".join(block[:6])


def load_script(name: str):
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_scaleout_prints_medians_spread_load_and_the_ratio_with_its_interval():
    from omnicli.benchmark.compare import PhaseRounds

    script = load_script("bench_scaleout")

    def doc(total, per_engine):
        return {"runs": [{"label": "cpu/c4", "audio_throughput": total, "p50_audio_ttfp_ms": 200.0,
                          "per_engine": [{"audio_throughput": x} for x in per_engine]}]}

    documents = {1: [doc(1.0, [1.0]), doc(1.2, [1.2]), doc(0.9, [0.9])],
                 2: [doc(1.6, [0.8, 0.8]), doc(1.8, [0.9, 0.9]), {"runs": []}]}  # 2 engines: one round failed
    rounds = {
        "1 engine(s)": PhaseRounds("1", [], [1.0, 2.0, 3.0]),
        "2 engine(s)": PhaseRounds("2", [], [2.0, 2.0, 5.0]),
    }
    lines = script.summary_lines([1, 2], documents, rounds)
    assert lines[0] == ("1 engine(s) c4: median 1.000 audio-s/s (min 0.900, max 1.200, 3 rounds, load 2.0); "
                        "per engine 1.00; p50 TTFP 200.0 ms")
    assert lines[1].startswith("2 engine(s) c4: median 1.700 audio-s/s (min 1.600, max 1.800, 2 rounds, load 3.0)")
    assert lines[2] == "  2 engine(s) / 1 engine(s): 1.70x, no interval (2 round(s); 3 needed)"


def test_bench_neutts_report_prints_ratios_with_intervals_and_the_ceiling(capsys):
    from types import SimpleNamespace

    script = load_script("bench_neutts")
    args = SimpleNamespace(rows=2, tokens=50, conc=[2], rounds=3, engines=["coal-off", "coal-on"], reference_rows=None)

    def engine(speed):
        return {
            "2": {
                "audio_s_per_s": speed,
                "talker_tokens_per_s": 9.0,
                "codec_ms_per_audio_s": 400.0,
                "mean_first_audio_ms": 900.0,
            }
        }

    res = {
        "load_start": (1.0, 1.0, 1.0),
        "load_end": (2.0, 2.0, 2.0),
        "load": {name: [1.0, 2.0, 3.0] for name in script.compared_phases(args)},
        "rounds": {
            "reference": [
                {
                    "audio_s_per_s": v,
                    "talker_tokens_per_s": 5.0,
                    "codec_ms_per_audio_s": 200.0,
                    "mean_first_audio_ms": 5000.0,
                    "codec_cpu_s_per_audio_s": 0.5,
                }
                for v in (0.1, 0.11, 0.09)
            ],
            "talker": [
                {"2": {"audio_s_per_s": v, "talker_tokens_per_s": 30.0, "talker_cpu_s_per_audio_s": 1.5}}
                for v in (0.6, 0.62, 0.58)
            ],
            "engine-coal-off": [engine(v) for v in (0.4, 0.42, 0.38)],
            "engine-coal-on": [engine(v) for v in (0.41, 0.39, 0.43)],
        },
    }
    script.report(res, args)
    out = capsys.readouterr().out
    assert "reference loop (c=1): median 0.100 audio-s/s (min 0.090, max 0.110, 3 rounds, load 2.0)" in out
    assert "c=2 coal-off: engine / reference 4.00x (90% interval" in out
    assert "c=2: engine coal-on / coal-off no difference measured (1.02x" in out
    # ceiling on N cores: N / (1.5 + 0.5) audio-s/s; the engine's fraction is its median over that
    cores = len(__import__("os").sched_getaffinity(0))
    assert (
        f"ceiling {cores / 2.0:.3f} audio-s/s" in out
        and f"coal-off {0.4 / (cores / 2.0):.2f}, coal-on {0.41 / (cores / 2.0):.2f}" in out
    )
    assert res["summary"]["coal-off 2"]["median"] == 0.4
