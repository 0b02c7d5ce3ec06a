"""`run_bench`: the whole of `omni bench` as a library call (the command parses and prints).

    args = BenchArgs(runs=[ProfileRun("default", load_profile())], shapes=[LoadShape(concurrency=4)],
                     report=ReportPlan((50, 90, 99), utc_now(), False, Path("out"), None, None))
    outcome = run_bench(args, BenchRunObserver(), BenchStop())

It owns the prompts, the engines (one in this process, or N on Ray: the pool
seam of omnicli.driver.pool), the session, the audio the rounds leave
(--audio-out / --keep-failed), `--eval` scoring, the engines' own run files
and the result files (omnicli.benchmark.outputs). Bad input raises
`UsageError` (exit 2) before any engine starts; the engine's failure and a
stop come back in the `BenchOutcome`, with whatever completed reported.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.benchmark.outputs import ReportPlan, report_passes
from omnicli.benchmark.session import BenchObserver, BenchPlan, BenchSession, EnginesPass, PassResult, ProfileRun
from omnicli.driver import STOP_GRACE_S, LoadShape, Prompt
from omnicli.driver.pool import EngineFacts, EnginePool, EngineStartError, LocalPool, RoundResult
from omnicli.errors import EXIT_ENGINE, EXIT_INTERRUPTED, EXIT_OUTPUT, EngineFailure, UsageError

if TYPE_CHECKING:
    from omnicli.benchmark.audio_out import RoundOutputs
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.benchmark.prompts import PromptSet
    from omnicli.engine.request import EngineDead, EngineLike
    from omnicli.profile import ResolvedProfile
    from omnicli.runtime.cluster import RayOptions


@dataclass
class BenchArgs:
    """What `omni bench` was asked for, its options already parsed (the command does that, exit 2)."""

    runs: list[ProfileRun]  # the profiles, labelled (A/B: several)
    shapes: list[LoadShape]
    report: ReportPlan  # what to print and write at the end
    manifest: Path | None = None  # None: the shipped demo set
    num_prompts: int | None = None
    seed: int = 0
    shuffle: bool = True
    max_new_tokens: int | None = None
    allow_outside_paths: bool = False
    rounds: int = 1
    warmup: int = 0
    warmup_pass: bool = False
    interleave: bool = False
    audio_out: Path | None = None
    keep_failed: Path | None = None
    bench_eval: BenchEval | None = None  # --eval, its models located already
    request_fields: dict[str, Any] = field(default_factory=dict)  # --extra-body: defaults of every prompt's request
    ray: RayOptions | None = None
    dataset: str | None = None  # --dataset-name seed-tts-text / seed-tts-design: how the manifest is read


class BenchRunObserver(BenchObserver):
    """The session's hooks plus the run's own; the command renders them. All optional."""

    def info(self, message: str) -> None: ...
    def writing(self) -> None:
        """The engines are closed (or the passes scored): the results are written at once."""

    def scoring(self, label: str, metrics: Sequence[str]) -> None:
        """`--eval` of one pass begins; `scored` follows."""

    def scored(self, label: str, figures: dict) -> None: ...


class BenchStop:
    """The caller's handle on a running bench, safe from any thread (a signal handler).

    `request()` winds the run down as a first Ctrl-C does (nothing more
    submitted, requests in flight get `grace_s`, engines closed, completed
    passes reported); `write_partial()` (a forced exit) writes the completed
    passes at once. The results are written holding `save_lock`.
    """

    def __init__(self, grace_s: float = STOP_GRACE_S) -> None:
        self.grace_s = grace_s
        self.requested = False
        self.save_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._partial: Callable[[], None] | None = None

    def request(self) -> bool:
        self.requested = True
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop closed meanwhile: the run is past its engines
                pass
        return True

    def write_partial(self) -> None:
        if self._partial is not None:
            self._partial()

    def _attach(self, loop: asyncio.AbstractEventLoop | None, event: asyncio.Event | None) -> None:
        self._loop, self._event = loop, event
        if event is not None and self.requested:  # a stop that came before the run had a loop
            event.set()


@dataclass
class BenchOutcome:
    """How a bench ended: the passes reported, the exit code of the report, what stopped it."""

    results: list[PassResult | EnginesPass]
    code: int  # 0 every request completed, 1 some failed
    outputs: RoundOutputs
    error: BaseException | None = None  # the engine failure (start or run) that ended it
    engine_error: EngineDead | None = None  # a fleet's engines that stopped serving (text only when written)
    interrupted: bool = False
    fleet: bool = False  # --ray: the engines of a Ray cluster

    @property
    def exit_code(self) -> int:
        """What the outcome means as an exit code (errors.py; README's table), first reason first."""
        if self.outputs.error is not None:
            return EXIT_OUTPUT
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.error is not None or self.engine_error is not None:
            return EXIT_ENGINE
        return self.code


async def start_engine(resolved: ResolvedProfile) -> EngineLike:
    """The engine of a local bench (the real one; tests put a stand-in here)."""
    from omnicli.engine.backends import start_engine as start  # the engine (vLLM) is imported only when started

    return await start(resolved)


def load_bench_prompts(args: BenchArgs) -> PromptSet:
    """The prompt set (reference audio loaded before any timing); UsageError on bad input."""
    from omnicli.benchmark.prompts import load_prompts
    from omnicli.manifest import ManifestError

    try:
        prompt_set = load_prompts(
            args.manifest, num_prompts=args.num_prompts, seed=args.seed, shuffle=args.shuffle,
            max_new_tokens=args.max_new_tokens, allow_outside_paths=args.allow_outside_paths, dataset=args.dataset,
            request_fields=args.request_fields,
        )
    except (ManifestError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    if prompt_set.errors:
        lines = [f"{len(prompt_set.errors)} unusable row(s) in {prompt_set.source}:"]
        lines += [f"  {line}" for line in prompt_set.errors[:20]]
        if len(prompt_set.errors) > 20:
            lines.append(f"  ... and {len(prompt_set.errors) - 20} more")
        lines.append("fix or remove them: a benchmark over a silently reduced prompt set would mislead")
        raise UsageError("\n".join(lines))
    if not prompt_set.prompts:
        raise UsageError(f"{prompt_set.source}: no prompts")
    return prompt_set


def check_outputs(report: ReportPlan, outputs: RoundOutputs,
                  runs: Sequence[tuple[str, LoadShape, str]] = ()) -> None:
    """Every path the run will write, checked before any engine starts (UsageError): results
    that cannot be written at the end would waste the whole benchmark. `runs` (profile label,
    load shape, model): the per-run files --append-result will append to, checked too."""
    from omnicli.atomic import folder_write_error
    from omnicli.benchmark.outputs.vllm import append_targets
    from omnicli.benchmark.vllm_format import appendable_text

    files = report.vllm
    if files is not None and files.save and files.append:
        for target in append_targets(files, report.result_dir or Path("."), report.date, report.result_filename, runs):
            appendable_text(target)  # ResultFileError (exit 2) when it is not a file of result objects

    for option, path in (("--csv", report.csv_path), ("--plot", report.plot)):
        if path is not None and path.is_dir():
            raise UsageError(f"{option} {path}: is a folder; give a file name")
    page = report.report_file
    # The summary file goes beside the --report page when nothing else names its folder: say so.
    by_page = page is not None and report.result_dir is None and report.path is not None \
        and report.path.parent == page.parent
    folders = [("--result-dir" if not by_page else f"--report {page}",
                report.path.parent if report.path is not None else None),
               ("--save-result", (report.result_dir or Path(".")) if report.vllm is not None else None),
               ("--csv", report.csv_path.parent if report.csv_path is not None else None),
               ("--plot", report.plot.parent if report.plot is not None else None),
               (f"--report {page}", page.parent if page is not None and not by_page else None)]
    problems = [f"{option}: {why}" for option, folder in folders
                if folder is not None and (why := folder_write_error(folder))]
    if (why := outputs.check()) is not None:
        problems.append(f"--audio-out: {why}")
    if problems:
        raise UsageError("\nerror: ".join(problems))


def score_passes(bench_eval: BenchEval, results: Sequence[PassResult | EnginesPass], outputs: RoundOutputs,
                 prompts: Sequence[Prompt], report: ReportPlan, observer: BenchRunObserver) -> None:
    """Scores each completed pass's audio; a failure is reported in that pass's entry, never fatal."""
    for result in results:
        folder = outputs.pass_dir(result.profile, result.shape)
        if folder is not None and outputs.unwritten.get(folder):  # scoring the clips that are there would mislead
            error = f"{outputs.unwritten[folder]} clip(s) could not be written to {folder}: not scored"
            observer.warning(f"--eval of {result.label}: {error}")
            report.extras[result.label] = {"eval": {"metrics": list(bench_eval.metrics), "error": error}}
            continue
        if folder is None:
            raise ValueError("--eval scores the kept audio: the run has no --audio-out folder")
        observer.scoring(result.label, bench_eval.metrics)
        try:
            figures = bench_eval.score_pass(folder, prompts, result.profile.profile)
        except Exception as exc:
            figures = {"metrics": list(bench_eval.metrics), "error": f"{type(exc).__name__}: {exc}"}
            observer.warning(f"--eval of {result.label} failed: {figures['error']}")
        report.extras[result.label] = {"eval": figures}
        observer.scored(result.label, figures)


class _Run:
    """One `run_bench`: its session, and the writing of what completed (also on a forced exit)."""

    def __init__(self, args: BenchArgs, observer: BenchRunObserver, stop: BenchStop):
        from omnicli.benchmark.audio_out import RoundOutputs
        from omnicli.retention import Retainer

        self.args, self.observer, self.stop = args, observer, stop
        prompt_set = load_bench_prompts(args)
        self.prompts: Sequence[Prompt] = prompt_set.prompts
        self.outputs = RoundOutputs(args.audio_out, Retainer.from_option(args.keep_failed),
                                    one_pass=len(args.runs) * len(args.shapes) == 1, warn=observer.warning)
        self.plan = BenchPlan(shapes=args.shapes, rounds=args.rounds, warmup_requests=args.warmup,
                              warmup_pass=args.warmup_pass, keep_pcm=self.outputs.needs_pcm, interleave=args.interleave)
        observer.info(
            f"{len(self.prompts)} prompts from {prompt_set.source} ({prompt_set.num_rows} rows); "
            f"{len(args.runs)} profile(s) x {len(args.shapes)} load shape(s) x {args.rounds} round(s)"
            + (", rounds alternating between the profiles" if args.interleave else "")
        )
        if args.interleave and args.rounds < 3:
            observer.info(f"--interleave with {args.rounds} round(s): medians and ratios only; "
                          "an interval needs --rounds 3 or more")
        appending = args.report.vllm is not None and args.report.vllm.append
        check_outputs(args.report, self.outputs, [(run.label, shape, run.profile.profile.model) for run in args.runs
                                                  for shape in args.shapes] if appending else [])
        self.session: BenchSession | None = None
        self.error: BaseException | None = None

    def new_session(self, runs: list[ProfileRun], pools: Callable[[ResolvedProfile], EnginePool]) -> BenchSession:
        report = self.args.report
        run_dir = report.path.parent if report.path is not None else report.result_dir
        self.session = BenchSession(runs, self.prompts, self.plan, pools, self.observer, self.stop.grace_s,
                                    round_sink=self._sink, run_dir=run_dir)
        return self.session

    def _sink(self, run: ProfileRun, shape: LoadShape, index: int, result: RoundResult, engine: EngineFacts) -> None:
        self.outputs.handle(run, shape, index, result, engine)
        if self.outputs.error is not None and self.session is not None:  # audio cannot be written: admit no more work
            self.session.stop.set()

    def drive(self, session: BenchSession) -> None:
        """Runs the session on a fresh loop; keeps the engine error that ended it, if one did."""
        from omnicli.engine.request import EngineError

        async def main() -> None:
            self.stop._attach(asyncio.get_running_loop(), session.stop)
            await session.run()

        try:
            asyncio.run(main())
        except (EngineStartError, EngineError) as exc:  # reported with the completed passes
            self.error = exc
        except Exception as exc:  # not the engine's failure (exit 3): recorded with what finished, then raised
            self.error = exc
            raise
        finally:
            self.stop._attach(None, None)

    def _error_text(self) -> str | None:
        """The error that ended the run as the result file records it (an error not the engine's: with its type)."""
        if self.error is None or isinstance(self.error, (EngineFailure, EngineStartError)):
            return None if self.error is None else str(self.error)
        return f"{type(self.error).__name__}: {self.error}"

    def write(self, *, forced: bool = False) -> int:
        """The report of the completed passes (`_report`); returns 0 or 1 (some failed)."""
        session, args = self.session, self.args
        results = list(session.results) if session is not None else []
        interrupted = forced or self.stop.requested
        unfinished = session.unfinished if session is not None else None
        dead = session.engine_error if session is not None else None
        error = None if interrupted else (str(dead) if dead is not None else self._error_text())
        if args.ray is None:
            return report_passes(
                results, args.report, interrupted=interrupted, unfinished=unfinished, engine_error=error, forced=forced
            )
        from omnicli.benchmark.engines import build_engines_run
        from omnicli.driver.ray_pool import ray_facts

        report = args.report
        runs = [build_engines_run(p, percentiles=report.percentiles, detailed=report.detailed)  # machine: engine 0's
                for p in results if isinstance(p, EnginesPass)]
        facts = ray_facts(args.ray.address, args.ray.resources, session.facts if session is not None else [])
        return report_passes(results, report, runs=runs, ray=facts, interrupted=interrupted, unfinished=unfinished,
                       engine_error=error, forced=forced)


def _drive(run: _Run, args: BenchArgs, observer: BenchRunObserver) -> BenchSession:
    """The session of `run`, on this process's engine or on a Ray cluster, driven to its end."""
    if args.ray is None:
        session = run.new_session(args.runs, LocalPool.factory(start_engine))
        run.drive(session)
        return session
    from omnicli.driver.ray_pool import RayPool
    from omnicli.runtime.cluster import RayCluster

    with RayCluster(args.ray.address, args.ray.resources, quiet=args.ray.quiet) as cluster:
        cluster.check_fits()
        if cluster.ray is None:
            raise RuntimeError("the Ray cluster is not connected")
        session = run.new_session(args.runs[:1], RayPool.factory(cluster.ray, args.ray.resources))
        run.drive(session)
        observer.engine_closing(args.runs[0])  # leaving the cluster (shut down when we started it)
    return session


def run_bench(args: BenchArgs, observer: BenchRunObserver, stop: BenchStop) -> BenchOutcome:
    """Runs `args` (see the module doc); UsageError before any engine starts on bad input."""
    run = _Run(args, observer, stop)

    def write_partial() -> None:
        run.write(forced=True)

    stop._partial = write_partial
    try:
        session = _drive(run, args, observer)
    except Exception:
        if run.error is not None:  # the run failed for a reason of its own: what finished is still written
            with stop.save_lock:
                stop._partial = None
                run.write()
        raise
    observer.writing()
    bench_eval, outputs = args.bench_eval, run.outputs
    if bench_eval is not None and run.error is None and not stop.requested and outputs.error is None:
        score_passes(bench_eval, session.results, outputs, run.prompts, args.report, observer)
        observer.writing()
    with stop.save_lock:
        code = run.write()
    stop._partial = None
    return BenchOutcome(results=list(session.results), code=code, outputs=outputs, error=run.error,
                        engine_error=session.engine_error, interrupted=stop.requested, fleet=args.ray is not None)


__all__ = [
    "BenchArgs", "BenchOutcome", "BenchRunObserver", "BenchStop",
    "run_bench", "score_passes", "start_engine",
]
