"""`omni bench`: load benchmark with the engine embedded: options -> `BenchArgs` -> `run_bench` -> exit code.

The run itself (prompts, engines, passes, --eval, result files) is
`omnicli.benchmark.entrypoint.run_bench`; this module renders its progress,
maps Ctrl-C / SIGTERM onto its stop (the policy `omni synth` uses too) and
ends with the bench's exit code.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from omnicli.benchmark.entrypoint import BenchOutcome, BenchRunObserver, BenchStop, run_bench
from omnicli.benchmark.finish import OutputFormat
from omnicli.benchmark.session import EngineStartError
from omnicli.commands import bench_options as opt
from omnicli.commands.bench_args import bench_args
from omnicli.commands.bench_options import ProfilesOption
from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_IO,
    CliConsole,
    QuietOption,
    RequestProgress,
    SetOption,
    VerboseOption,
    err_console,
    note,
    set_verbosity,
    status,
)
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.commands.report import ReportOption, check_report_option

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from omnicli.benchmark.session import ProfileRun
    from omnicli.driver import RequestRecord
    from omnicli.driver.pool import EngineFacts


class BenchInterrupts(EngineRunInterrupts):
    """Ctrl-C / SIGTERM for one `omni bench`, local or --ray (the policy is shared with `omni synth`).

    The first signal while passes run (with --ray also while engines start: this
    process only waits on Ray) stops the run: nothing more is submitted,
    requests in flight get their grace, the engines are closed and the
    completed passes reported. During a local engine start-up, while scoring,
    and on a second signal, the engines' processes are ended, the completed
    passes written, exit 130.
    """

    forced_note = "completed passes are kept"

    def __init__(self, stop: BenchStop, *, graceful_start: bool = False):
        super().__init__()
        self.stop = stop
        self.engines = "engines are" if graceful_start else "engine is"  # --ray: N engines
        self.save_lock = stop.save_lock
        self.graceful_phases = ((Phase.STARTING,) if graceful_start else ()) + (Phase.RUNNING, Phase.CLOSING)
        self.progress: RequestProgress | None = None

    def request_stop(self, sig: signal.Signals) -> bool:
        err_console.print(
            f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.stop.grace_s:g}s to finish, "
            f"then the {self.engines} closed and completed passes are reported (again to force)"
        )
        return self.stop.request()

    def save_partial(self) -> None:
        if self.progress is not None:
            self.progress.stop()  # restores the terminal before os._exit
        self.stop.write_partial()


class ConsoleObserver(BenchRunObserver):
    """Renders the run: a live bar per phase, messages on stderr; tells `interrupts` the phase."""

    def __init__(self, progress: RequestProgress, interrupts: EngineRunInterrupts):
        self.progress = progress
        self.interrupts = interrupts
        self._seen = (0, 0, 0.0)
        self._status: AbstractContextManager[object] | None = None

    def engine_starting(self, run: ProfileRun) -> None:
        self.interrupts.phase = Phase.STARTING
        note(f"[bold]starting engine[/bold] for profile {run.label} ({run.profile.digest}) ...")

    def engine_started(self, run: ProfileRun, facts: list[EngineFacts]) -> None:
        self.interrupts.phase = Phase.RUNNING
        for f in facts:
            where = "" if f.node is None else f" {f.engine} on node {f.node[:12]}"
            note(f"engine{where} ready: {f.model} on {f.device}, {f.sample_rate} Hz")

    def engine_closing(self, run: ProfileRun) -> None:
        self.interrupts.phase = Phase.CLOSING

    def phase_start(self, description: str, total: int) -> None:
        self._seen = (0, 0, 0.0)
        self.progress.start(description, total)

    def request_done(self, record: RequestRecord) -> None:
        self.progress.done(failed=record.error is not None, audio_seconds=record.audio_duration)

    def phase_progress(self, done: int, failed: int, audio_seconds: float) -> None:
        seen_done, seen_failed, seen_audio = self._seen
        new = done - seen_done
        if new <= 0:  # polled again with nothing new (or an engine that did not answer): never counted down
            return
        new_failed = max(0, failed - seen_failed)
        for i in range(new):  # the bar counts requests one by one
            self.progress.done(failed=i < new_failed, audio_seconds=(audio_seconds - seen_audio) / new)
        self._seen = (done, failed, audio_seconds)

    def phase_end(self) -> None:
        self.progress.end()

    def run_file(self, path: object) -> None:
        note(f"wrote {path}")

    def info(self, message: str) -> None:
        note(message)

    def warning(self, message: str) -> None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)

    def writing(self) -> None:
        self.interrupts.phase = Phase.DONE  # from here on a signal changes nothing: the results follow at once

    def scoring(self, label: str, metrics: Sequence[str]) -> None:
        self.interrupts.phase = Phase.SCORING  # a signal writes the benchmark (the passes scored so far), exits 130
        self._status = status(f"scoring {label} ({','.join(metrics)}) ...")
        self._status.__enter__()

    def scored(self, label: str, figures: dict) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None
        keys = ("seed_wer_mean", "sim_mean", "sim_backend", "dnsmos_ovrl_mean", "utmos_mean")
        note(f"eval {label}: " + ", ".join(f"{k} {figures[k]}" for k in keys if figures.get(k) is not None))


def bench(
    manifest_arg: opt.ManifestArgOpt = None,
    manifest: opt.ManifestOpt = None,
    num_prompts: opt.NumPromptsOpt = None,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = None,
    burstiness: opt.BurstinessOpt = 1.0,
    seed: opt.SeedOpt = 0,
    disable_shuffle: opt.DisableShuffleOpt = False,
    max_new_tokens: opt.MaxNewTokensOpt = None,
    warmup: opt.WarmupOpt = 0,
    warmup_pass: opt.WarmupPassOpt = False,
    rounds: opt.RoundsOpt = 1,
    metric_percentiles: opt.MetricPercentilesOpt = "50,90,99",
    percentile_metrics: opt.PercentileMetricsOpt = None,
    profile: ProfilesOption = None,
    compare: opt.CompareOpt = None,
    interleave: opt.InterleaveOpt = False,
    set_: SetOption = None,
    save_result: opt.SaveResultOpt = False,
    append_result: opt.AppendResultOpt = False,
    result_dir: opt.ResultDirOpt = None,
    result_filename: opt.ResultFilenameOpt = None,
    label: opt.LabelOpt = None,
    metadata: opt.MetadataOpt = None,
    csv_path: opt.CsvPathOpt = None,
    output_format: opt.OutputFormatOpt = OutputFormat.table,
    save_detailed: opt.SaveDetailedOpt = False,
    plot: opt.PlotOpt = None,
    audio_out: opt.AudioOutOpt = None,
    eval_metrics: opt.EvalMetricsOpt = None,
    eval_asr: opt.EvalAsrOpt = None,
    keep_failed: opt.KeepFailedOpt = None,
    allow_outside_paths: opt.AllowOutsidePathsOpt = False,
    ray: opt.RayOpt = False,
    ray_address: opt.RayAddressOpt = None,
    engines: opt.EnginesOpt = None,
    gpus_per_engine: opt.GpusPerEngineOpt = None,
    cpus_per_engine: opt.CpusPerEngineOpt = None,
    report_file: ReportOption = None,
    dataset_name: opt.DatasetNameOpt = None,
    dataset_path: opt.DatasetPathOpt = None,
    seed_tts_locale: opt.SeedTtsLocaleOpt = "en",
    extra_body: opt.ExtraBodyOpt = None,
    temperature: opt.TemperatureOpt = None,
    top_p: opt.TopPOpt = None,
    top_k: opt.TopKOpt = None,
    repetition_penalty: opt.RepetitionPenaltyOpt = None,
    output_len: opt.OutputLenOpt = None,
    goodput: opt.GoodputOpt = None,
    ramp_up_strategy: opt.RampUpStrategyOpt = None,
    ramp_up_start_rps: opt.RampUpStartRpsOpt = None,
    ramp_up_end_rps: opt.RampUpEndRpsOpt = None,
    plot_timeline: opt.PlotTimelineOpt = False,
    timeline_itl_thresholds: opt.TimelineItlThresholdsOpt = "25,50",
    disable_tqdm: opt.DisableTqdmOpt = False,
    seed_tts_wer_eval: opt.SeedTtsWerEvalOpt = False,
    backend: opt.BackendOpt = None,
    endpoint: opt.EndpointOpt = None,
    host: opt.HostOpt = None,
    port: opt.PortOpt = None,
    base_url: opt.BaseUrlOpt = None,
    model: opt.ModelOpt = None,
    tokenizer: opt.TokenizerOpt = None,
    served_model_name: opt.ServedModelNameOpt = None,
    ready_check_timeout_sec: opt.ReadyCheckTimeoutSecOpt = None,
    trust_remote_code: opt.TrustRemoteCodeOpt = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Measure first-audio latency, real-time factor and audio throughput of the embedded engine.

    Same metrics and names as `vllm bench serve --omni` (audio_ttfp, e2el,
    audio_rtf, audio_throughput, ...). Ctrl-C or SIGTERM stops submitting,
    lets requests in flight finish for a few seconds, closes the engine and
    reports the completed passes; a second Ctrl-C exits at once. Exit codes:
    0 all requests completed, 1 some failed, 2 bad usage or input, 3 the
    engine failed, 130 interrupted. With --ray, N engines on a Ray cluster
    run every pass at the same time; see docs/scale-out.md.
    """
    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    args = bench_args(SimpleNamespace(**locals()))
    stop = BenchStop()
    interrupts = BenchInterrupts(stop, graceful_start=args.ray is not None)
    console = CliConsole(stderr=True, quiet=True) if disable_tqdm else err_console
    with interrupts.signals(), RequestProgress(console) as progress:
        interrupts.progress = progress
        outcome = run_bench(args, ConsoleObserver(progress, interrupts), stop)
    _exit(outcome)


def _exit(outcome: BenchOutcome) -> None:
    outputs, done = outcome.outputs, len(outcome.results)
    if outputs.audio_dir is not None:
        err_console.print(f"{outputs.wavs_written} wav file(s) in {outputs.audio_dir}")
    if outputs.retainer is not None and outputs.retained:
        err_console.print(f"{outputs.retained} output(s) retained in {outputs.retainer.directory}")
    if outputs.error is not None:
        err_console.print(f"[red]error:[/red] {outputs.error}; stopped, {done} completed pass(es) reported",
                          highlight=False)
        raise typer.Exit(EXIT_OUTPUT_IO)
    if outcome.interrupted:
        closed = "engines were" if outcome.fleet else "engine was"
        err_console.print(f"[yellow]interrupted[/yellow]: the {closed} closed; {done} completed pass(es) reported")
        raise typer.Exit(EXIT_INTERRUPTED)
    if outcome.error is not None:
        prefix = "error" if isinstance(outcome.error, EngineStartError) else "engine failed"
        err_console.print(f"[red]{prefix}:[/red] {escape(str(outcome.error))}")
        raise typer.Exit(EXIT_ENGINE)
    if outcome.engine_error is not None:
        err_console.print(f"[red]engine failed:[/red] {escape(outcome.engine_error)}")
        raise typer.Exit(EXIT_ENGINE)
    raise typer.Exit(outcome.code)
