"""Load benchmark of the embedded engine (`omni bench`), usable from Python.

    prompts = load_prompts(None, num_prompts=16).prompts
    plan = BenchPlan(shapes=[LoadShape(concurrency=c) for c in (1, 8)], warmup_requests=2)
    session = BenchSession([ProfileRun("default", load_profile())], prompts, plan, LocalPool.factory())
    results = asyncio.run(session.run())
    runs = [build_run(r) for r in results]   # BenchRun objects: docs/metrics.md keys as fields
    build_document(runs, started_at).write("result.json")   # BenchDocument.load reads it back

Metric definitions: docs/bench.md and docs/metrics.md ("Benchmark").
"""

from omnicli.benchmark.metrics import distribution, summarize
from omnicli.benchmark.prompts import PromptSet, load_prompts, select_rows
from omnicli.benchmark.report import build_document, build_run, compare_runs
from omnicli.benchmark.session import (
    BenchObserver,
    BenchPlan,
    BenchSession,
    EngineStartError,
    PassResult,
    ProfileRun,
    RoundResult,
    run_round,
)
from omnicli.driver import LoadShape, Prompt, RequestRecord, arrival_offsets

__all__ = [
    "BenchObserver",
    "BenchPlan",
    "BenchSession",
    "EngineStartError",
    "LoadShape",
    "PassResult",
    "PromptSet",
    "ProfileRun",
    "Prompt",
    "RequestRecord",
    "RoundResult",
    "arrival_offsets",
    "build_document",
    "build_run",
    "compare_runs",
    "distribution",
    "load_prompts",
    "run_round",
    "select_rows",
    "summarize",
]
