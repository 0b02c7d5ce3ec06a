"""The engine-pool seam (omnicli.driver.pool): a LocalPool over a small fake engine, and a
BenchSession over a fake pool of two engines (their rounds merged per pass, each phase a barrier)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from omnicli.benchmark.engines import build_engines_run
from omnicli.benchmark.session import BenchObserver, BenchPlan, BenchSession, EnginesPass, ProfileRun
from omnicli.driver import LoadShape
from omnicli.driver.pool import EngineFacts, LocalPool, RoundResult, run_round
from omnicli.profile import load_profile
from tests.fakes import FakeEngine, prompts


class FilesEngine(FakeEngine):
    def write_run_files(self, run_dir):
        path = Path(run_dir) / "overlay.yaml"
        path.write_text("stage: 1\n")
        return [path]


def test_local_pool_starts_drives_and_closes_its_one_engine(tmp_path):
    engines = []

    async def start(profile):
        engines.append(FilesEngine(step=0.001))
        return engines[-1]

    pool = LocalPool(SimpleNamespace(), start)

    async def main():
        with pytest.raises(RuntimeError, match="not started"):
            await pool.phase(prompts(["a"]), LoadShape(), "x", keep_pcm=False, on_done=print, on_progress=print,
                             stop=asyncio.Event(), grace_s=0)
        facts = await pool.start(asyncio.Event())
        done = []
        results = await pool.phase(prompts(["a", "b", "c"]), LoadShape(concurrency=2), "p0", keep_pcm=True,
                                   on_done=lambda r: done.append(r.utt), on_progress=print, stop=asyncio.Event(),
                                   grace_s=0)
        files = pool.write_run_files(tmp_path)
        await pool.close()
        return facts, results, done, files

    facts, (result,), done, files = asyncio.run(main())
    assert facts == [EngineFacts(engine=0, model="fake", device="cpu", sample_rate=1000)]
    assert sorted(done) == ["u0", "u1", "u2"] and [r.utt for r in result.records] == ["u0", "u1", "u2"]
    assert all(r.request_id.startswith("p0") and r.pcm is not None for r in result.records)
    assert files == [tmp_path / "overlay.yaml"] and (tmp_path / "overlay.yaml").exists()
    assert engines[0].closed and pool.engine is None
    assert pool.write_run_files(tmp_path) == []  # closed: nothing of an engine left to write


class TwoEngines:
    """A fleet of two fake engines in this process: each phase runs on both at once; records the
    phases it was given, whether two ever overlapped, and can fail engine 1 at a phase."""

    per_engine = True
    graceful_start = True

    def __init__(self, log: list, *, die_at: str | None = None):
        self.engines = [FakeEngine(step=0.002), FakeEngine(step=0.004)]
        self.log, self.die_at = log, die_at
        self.busy = False

    async def start(self, stop):
        return [EngineFacts(engine=i, model="fake", device="cpu", sample_rate=1000, node=f"n{i}") for i in (0, 1)]

    async def phase(self, prompts, shape, id_prefix, *, keep_pcm, on_done, on_progress, stop, grace_s):
        assert not self.busy, "a phase began before the previous one ended on every engine"
        self.busy = True
        self.log.append(id_prefix)
        try:
            results = list(await asyncio.gather(*(
                run_round(e, prompts, shape, id_prefix=f"e{i}-{id_prefix}", stop=stop, grace_s=grace_s)
                for i, e in enumerate(self.engines))))
        finally:
            self.busy = False
        if self.die_at is not None and self.die_at in id_prefix:
            results[1] = RoundResult(records=[], error="codec stage stopped")
        on_progress(sum(len(r.records) for r in results), 0, 0.0)
        return results

    def write_run_files(self, run_dir):
        return []

    async def close(self):
        for e in self.engines:
            await e.close()


class Phases(BenchObserver):
    def __init__(self):
        self.events = []

    def phase_start(self, description, total):
        self.events.append(("start", description, total))

    def phase_progress(self, done, failed, audio_seconds):
        self.events.append(("progress", done))

    def phase_end(self):
        self.events.append(("end",))


def fleet_session(pool, texts, plan, observer=None):
    run = ProfileRun("f", load_profile("default"))
    return BenchSession([run], prompts(texts), plan, lambda profile: pool, observer)


def test_a_fleet_pass_merges_both_engines_rounds_one_phase_after_the_other():
    log, observer = [], Phases()
    pool = TwoEngines(log)
    plan = BenchPlan(shapes=[LoadShape(concurrency=2), LoadShape(concurrency=4)], rounds=2, warmup_requests=1)
    results = asyncio.run(fleet_session(pool, ["a"] * 3, plan, observer).run())
    assert log == ["p0-warmup", "p0-c2-r0", "p0-c2-r1", "p0-c4-r0", "p0-c4-r1"]  # in order, each phase once
    assert [e for e in observer.events if e[0] == "start"][1] == ("start", "f c2 round 1/2", 6)  # 3 prompts x 2 engines
    assert all(isinstance(p, EnginesPass) for p in results) and [p.shape.concurrency for p in results] == [2, 4]
    first = results[0]
    assert [e.node for e in first.engines] == ["n0", "n1"]
    for index, engine in enumerate(first.engines):  # each engine's own records, not the other's
        ids = [r.request_id for rnd in engine.result.rounds for r in rnd.records]
        assert len(ids) == 6 and all(i.startswith(f"e{index}-") for i in ids)
    assert [e.result.warmup_requests for e in first.engines] == [1, 1]
    assert [e.result.warmup_requests for e in results[1].engines] == [0, 0]
    run = build_engines_run(first)
    per = run["per_engine"]
    assert run["num_engines"] == 2 and run["completed"] == 12 == sum(e["completed"] for e in per)
    assert run["audio_throughput"] == pytest.approx(sum(e["audio_throughput"] for e in per))
    assert run["duration"] == max(e["duration"] for e in per) and run["warmup_requests"] == 2
    assert all(e.closed for e in pool.engines)


def test_a_fleet_engine_that_dies_ends_the_run_after_that_pass_with_the_others_figures():
    log = []
    pool = TwoEngines(log, die_at="c2-r1")
    plan = BenchPlan(shapes=[LoadShape(concurrency=2), LoadShape(concurrency=4)], rounds=3)
    session = fleet_session(pool, ["a"] * 3, plan)
    (passed,) = asyncio.run(session.run())
    assert log == ["p0-c2-r0", "p0-c2-r1"]  # no third round, no second shape
    assert str(session.engine_error) == "engine 1: codec stage stopped"
    assert [e.error for e in passed.engines] == [None, "codec stage stopped"]
    assert len(passed.engines[0].result.rounds) == 2 and passed.engines[1].result is None
    assert build_engines_run(passed)["completed"] == 6
    assert all(e.closed for e in pool.engines)


def test_a_stop_during_a_fleet_start_closes_it_and_runs_nothing():
    class Abandoned(TwoEngines):
        async def start(self, stop):
            stop.set()  # as a Ctrl-C while the engines start
            return []

    log = []
    pool = Abandoned(log)
    session = fleet_session(pool, ["a"], BenchPlan(shapes=[LoadShape()]))
    assert asyncio.run(session.run()) == [] and log == [] and all(e.closed for e in pool.engines)


def test_an_engines_run_files_land_beside_the_bench_results(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import omnicli.benchmark.entrypoint as bench_entry
    from omnicli.cli import app

    started = []

    async def start(resolved):
        started.append(FilesEngine(step=0.001))
        return started[-1]

    monkeypatch.setattr(bench_entry, "start_engine", start)
    out = tmp_path / "res"
    result = CliRunner().invoke(app, ["bench", "-n", "2", "-c", "1,2", "--result-dir", str(out),
                                      "--result-filename", "r.json"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["overlay.yaml", "r.json"]  # the engine's file, once
    assert f"wrote {out / 'overlay.yaml'}" in " ".join(result.output.split()) and len(started) == 1
