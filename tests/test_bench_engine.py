"""The benchmark library on the real omni-tiny engine (the session's shared one)."""

import pytest

from omnicli.benchmark import BenchPlan, BenchSession, LoadShape, ProfileRun, build_run, load_prompts
from omnicli.driver.pool import LocalPool

pytestmark = pytest.mark.engine


class Borrowed:
    """The shared engine, lent to one session: closing is left to its fixture."""

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    async def close(self):
        pass


def max_overlap(records):
    events = sorted([(r.start, 1) for r in records] + [(r.end, -1) for r in records], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_concurrency_1_and_8_on_omni_tiny(engine_harness):
    engine = engine_harness.engine
    prompts = load_prompts(None, num_prompts=8, max_new_tokens=40).prompts
    plan = BenchPlan(shapes=[LoadShape(concurrency=1), LoadShape(concurrency=8)], warmup_requests=2)

    async def lend(resolved):
        return Borrowed(engine)

    session = BenchSession([ProfileRun("test", engine.resolved)], prompts, plan, LocalPool.factory(lend))
    c1, c8 = engine_harness.run(session.run())

    for res in (c1, c8):
        run = build_run(res).to_dict()  # as the result file holds it
        assert (run["completed"], run["failed"], run["num_nonempty_audio"]) == (8, 0, 8), run["failures"]
        assert run["mean_audio_duration_s"] == pytest.approx(40 / 4 / 12.5)  # 40 tokens = 10 frames at 12.5/s
        assert 0 < run["mean_audio_ttfp_ms"] <= run["mean_e2el_ms"]
        assert run["audio_throughput"] == pytest.approx(8 * 0.8 / run["duration"])
        assert run["talker_tokens"] >= 8 * 40 and run["codec_steps"] > 0
        assert run["num_ref_hot"] + run["num_ref_cold"] == 8
        assert run["profile_digest"] == engine.resolved.digest
    # closed loop: one at a time at c=1; several in flight at c=8
    assert max_overlap(c1.rounds[0].records) == 1
    assert max_overlap(c8.rounds[0].records) > 1
    # every reference was encoded by the first pass at the latest
    assert build_run(c8).num_ref_cold == 0
