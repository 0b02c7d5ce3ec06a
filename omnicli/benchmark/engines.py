"""One pass run by several engines at once (`omni bench --ray --engines N`), merged.

Every engine gets the same load shape and prompts, and the engines run each
round at the same time, so N engines offer N times the load. Their results
merge as a user of the whole fleet sees them:

- work adds up: completed, failed, audio seconds, tokens, underrun counts;
- throughputs add up: each engine's (audio s/s, requests/s, talker tokens/s)
  is its own work over its own round durations, and the fleet's is the sum.
  Request times are `perf_counter()` values of each engine's own process, so
  no span is ever taken across two engines' clocks; the merged `duration`
  is the slowest engine's;
- distributions (TTFP, E2EL, RTF, ...) are over the pooled per-request
  samples of every engine, never a mean of per-engine percentiles.

The formulas themselves are `omnicli.benchmark.metrics.summarize`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from omnicli.benchmark.metrics import DEFAULT_PERCENTILES, detailed_lists, summarize
from omnicli.benchmark.report import run_fields
from omnicli.benchmark.session import EnginePass, EnginesPass
from omnicli.driver import RequestRecord
from omnicli.engine.request import EngineStats

__all__ = ["EnginePass", "EnginesPass", "build_engines_run", "engine_entry", "merge_stats", "merge_summaries"]

# Rates: each engine's own work / own duration, summed over engines.
SUMMED_RATES = ("request_throughput", "audio_throughput")
# Keys every engine of a pass shares: kept once, on the merged run.
SHARED_KEYS = (
    "omni_version", "label", "profile_label", "profile_name", "profile", "profile_digest", "model",
    "sample_rate", "machine", "max_concurrency", "request_rate", "burstiness", "seed", "num_prompts", "rounds",
)


def merge_summaries(
    engine_rounds: Sequence[Sequence[Sequence[RequestRecord]]], percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> dict:
    """`summarize` of N engines' rounds (engine -> round -> records) that ran at the same time.

    Counts and distributions are those of the pooled records; `duration` and
    `round_durations` are the slowest engine's; throughputs are the sum of
    each engine's own.
    """
    if not engine_rounds:
        raise ValueError("no engine results to merge")
    per_engine = [summarize(rounds, percentiles) for rounds in engine_rounds]
    merged = summarize([rnd for rounds in engine_rounds for rnd in rounds], percentiles)
    num_rounds = max(len(s["round_durations"]) for s in per_engine)
    merged["round_durations"] = [
        max((s["round_durations"][i] for s in per_engine if i < len(s["round_durations"])), default=0.0)
        for i in range(num_rounds)
    ]
    merged["duration"] = max(s["duration"] for s in per_engine)
    for key in SUMMED_RATES:
        merged[key] = float(sum(s[key] for s in per_engine))
    return merged


def merge_stats(stats: Sequence[EngineStats]) -> dict:
    """The engines' counter differences summed (`EngineStats.to_dict` keys).

    `talker_tokens_per_s` is the sum of each engine's rate (their talkers run
    side by side); `mean_codec_batch_size` is over every engine's codec steps.
    """
    total = EngineStats()
    for s in stats:
        total = total.plus(s)
    out = total.to_dict()
    out["talker_tokens_per_s"] = float(sum(s.to_dict()["talker_tokens_per_s"] for s in stats))
    return out


def engine_entry(engine: EnginePass, *, percentiles: Sequence[float], machine: dict | None,
                 detailed: bool = False) -> dict:
    """One engine's figures for the pass (`per_engine` of the result file)."""
    entry: dict = {"engine": engine.engine, "node": engine.node, "engine_error": engine.error,
                   "machine": engine.machine}
    if engine.result is not None and engine.error is None:
        run = run_fields(engine.result, percentiles=percentiles, machine=machine, detailed=detailed)
        entry.update({k: v for k, v in run.items() if k not in SHARED_KEYS})
        for failure in entry["failures"]:
            failure["engine"] = engine.engine
    return entry


def build_engines_run(
    passed: EnginesPass, *, percentiles: Sequence[float] = DEFAULT_PERCENTILES, machine: dict | None = None,
    detailed: bool = False,
) -> dict:
    """The merged result dict of a pass (docs/metrics.md keys) with a `per_engine` list.

    Figures are over the engines that completed the pass; one that failed
    is listed with its `engine_error`. ValueError when none completed it.
    `machine` defaults to the first engine's own (`EnginePass.machine`).
    `detailed`: each engine's per-request lists (times relative to its own
    round start), and on the merged run their concatenation in engine order
    with `request_engines` naming each request's engine.
    """
    healthy = passed.healthy
    if not healthy:
        raise ValueError(f"no engine completed {passed.label}")
    done = [e.result for e in healthy if e.result is not None]  # every healthy engine has its result
    if machine is None:
        machine = healthy[0].machine
    run = run_fields(done[0], percentiles=percentiles, machine=machine)
    run.update(merge_summaries([r.record_rounds for r in done], percentiles))
    stats = merge_stats([r.stats for r in done])
    run.update({k: stats[k] for k in ("talker_tokens", "talker_tokens_per_s", "codec_steps", "codec_frames",
                                      "mean_codec_batch_size", "coalescing_waits", "coalescing_wait_ms")})
    run["engine_stats"] = stats
    run["started_at"] = min(r.started_at for r in done)
    run["warmup_requests"] = sum(r.warmup_requests for r in done)
    run["warmup_failed"] = sum(r.warmup_failed for r in done)
    run["num_engines"] = len(passed.engines)
    run["per_engine"] = [engine_entry(e, percentiles=percentiles, machine=machine, detailed=detailed)
                         for e in passed.engines]
    run["failures"] = [f for entry in run["per_engine"] for f in entry.get("failures", [])]
    if detailed:
        ok = [entry for entry in run["per_engine"] if entry["engine_error"] is None]
        for key in detailed_lists([]):
            run[key] = [value for entry in ok for value in entry[key]]
        run["request_engines"] = [entry["engine"] for entry in ok for _ in entry["utts"]]
    return run
