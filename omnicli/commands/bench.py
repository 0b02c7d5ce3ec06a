"""`omni bench`: load benchmark, engine embedded: `BenchOptions` -> `BenchArgs` -> `run_bench` -> exit code.

The run itself (prompts, engines, passes, --eval, result files) is
`omnicli.benchmark.entrypoint.run_bench`; this module renders its progress,
maps Ctrl-C / SIGTERM onto its stop (the policy `omni synth` uses too) and
ends with the bench's exit code.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from omnicli.benchmark.entrypoint import BenchOutcome, BenchStop, run_bench
from omnicli.benchmark.options import BenchOptions, OptionError, bench_args
from omnicli.benchmark.seed_tts_env import seed_tts_env_notes
from omnicli.benchmark.session import EngineStartError
from omnicli.commands import bench_options as opt
from omnicli.commands import bench_vllm
from omnicli.commands.bench_console import ConsoleObserver
from omnicli.commands.bench_options import ProfilesOption
from omnicli.commands.common import (
    QuietOption,
    RequestProgress,
    SetOption,
    VerboseOption,
    require_folder,
    resolve_profile,
)
from omnicli.commands.interrupts import BenchInterrupts
from omnicli.commands.report import ReportOption, check_report_option, report_after_run
from omnicli.runtime.console import VERBOSITY, CliConsole, err_console, note, set_verbosity


def bench(
    ctx: typer.Context,
    manifest_arg: opt.ManifestArgOpt = None,
    manifest: opt.ManifestOpt = None,
    num_prompts: opt.NumPromptsOpt = None,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = None,
    burstiness: opt.BurstinessOpt = BenchOptions.burstiness,
    seed: opt.SeedOpt = BenchOptions.seed,
    disable_shuffle: opt.DisableShuffleOpt = False,
    max_new_tokens: opt.MaxNewTokensOpt = None,
    warmup: opt.WarmupOpt = BenchOptions.warmup,
    warmup_pass: opt.WarmupPassOpt = False,
    rounds: opt.RoundsOpt = BenchOptions.rounds,
    metric_percentiles: opt.MetricPercentilesOpt = BenchOptions.metric_percentiles,
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
    output_format: opt.OutputFormatOpt = BenchOptions.output_format,
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
    seed_tts_locale: opt.SeedTtsLocaleOpt = BenchOptions.seed_tts_locale,
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
    timeline_itl_thresholds: opt.TimelineItlThresholdsOpt = BenchOptions.timeline_itl_thresholds,
    disable_tqdm: opt.DisableTqdmOpt = False,
    seed_tts_wer_eval: opt.SeedTtsWerEvalOpt = False,
    seed_tts_root: opt.SeedTtsRootOpt = None,
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
    engine failed, 130 interrupted (a request that produced no audio failed).
    With --ray, N engines on a Ray cluster run every pass at the same time;
    see docs/scale-out.md. Every other flag of vLLM-Omni's `vllm bench serve
    --omni` is accepted and reported once as not applying (docs/bench.md).
    Environment: OMNI_FAILED_SPEECH_AUDIO_DIR (--keep-failed), OMNI_CACHE_DIR
    (models and caches), OMNI_PROFILES_DIR (presets),
    VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S (continuity, default 0.1 s);
    vLLM-Omni's SEED_TTS_WER_EVAL, SEED_TTS_SIM_EVAL, SEED_TTS_HF_WHISPER_MODEL,
    SEED_TTS_EVAL_DEVICE and SEED_TTS_WER_SAVE_AUDIO_DIR configure --eval as
    there; its other SEED_TTS_* variables are named once as ignored.
    """
    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    for line in bench_vllm.reported_flags(ctx):  # vLLM-Omni's flags that do not apply (omnicli.benchmark.vllm_flags)
        note(line)
    for line in seed_tts_env_notes():  # and its SEED_TTS_* variables
        note(line)
    options = BenchOptions(manifest_arg=manifest_arg, manifest=manifest, num_prompts=num_prompts,
        concurrency=concurrency, request_rate=request_rate, burstiness=burstiness, seed=seed,
        disable_shuffle=disable_shuffle, max_new_tokens=max_new_tokens, warmup=warmup, warmup_pass=warmup_pass,
        rounds=rounds, metric_percentiles=metric_percentiles, percentile_metrics=percentile_metrics, profile=profile,
        compare=compare, interleave=interleave, set_=set_, save_result=save_result, append_result=append_result,
        result_dir=result_dir, result_filename=result_filename, label=label, metadata=metadata, csv_path=csv_path,
        output_format=output_format, save_detailed=save_detailed, plot=plot, audio_out=audio_out,
        eval_metrics=eval_metrics, eval_asr=eval_asr, keep_failed=keep_failed,
        allow_outside_paths=allow_outside_paths, ray=ray, ray_address=ray_address, engines=engines,
        gpus_per_engine=gpus_per_engine, cpus_per_engine=cpus_per_engine, report_file=report_file,
        dataset_name=dataset_name, dataset_path=dataset_path, seed_tts_locale=seed_tts_locale, extra_body=extra_body,
        temperature=temperature, top_p=top_p, top_k=top_k, repetition_penalty=repetition_penalty,
        output_len=output_len, goodput=goodput, ramp_up_strategy=ramp_up_strategy,
        ramp_up_start_rps=ramp_up_start_rps, ramp_up_end_rps=ramp_up_end_rps, plot_timeline=plot_timeline,
        timeline_itl_thresholds=timeline_itl_thresholds, disable_tqdm=disable_tqdm,
        seed_tts_wer_eval=seed_tts_wer_eval, seed_tts_root=seed_tts_root, backend=backend, endpoint=endpoint,
        host=host, port=port, base_url=base_url, model=model, tokenizer=tokenizer,
        served_model_name=served_model_name, ready_check_timeout_sec=ready_check_timeout_sec,
        trust_remote_code=trust_remote_code)
    try:
        args = bench_args(options, resolve=resolve_profile, require_folder=require_folder, info=note,
                          verbose=VERBOSITY.verbose)
    except OptionError as exc:  # click's own usage error, naming the option
        raise typer.BadParameter(exc.message, param_hint=exc.option) from None
    stop = BenchStop()
    interrupts = BenchInterrupts(stop, graceful_start=args.ray is not None)
    console = CliConsole(stderr=True, quiet=True) if disable_tqdm else err_console
    with interrupts.signals(), RequestProgress(console) as progress:
        interrupts.progress = progress
        engines = None if args.ray is None else args.ray.resources.engines
        observer = ConsoleObserver(progress, interrupts, ray_engines=engines)
        outcome = run_bench(args, observer, stop)
    if outcome.results and args.report.path is not None:  # --report: the page of the summary file just written
        report_after_run(args.report.report_file, [args.report.path, *args.report.report_dirs])
    _exit(outcome)


def _exit(outcome: BenchOutcome) -> None:
    """Prints how the run ended, then exits with `outcome.exit_code`."""
    _print_ending(outcome)
    raise typer.Exit(outcome.exit_code)


def _print_ending(outcome: BenchOutcome) -> None:
    outputs, done = outcome.outputs, len(outcome.results)
    if outputs.audio_dir is not None:
        err_console.print(f"{outputs.wavs_written} wav file(s) in {outputs.audio_dir}")
    if outputs.retainer is not None and outputs.retained:
        err_console.print(f"{outputs.retained} output(s) retained in {outputs.retainer.directory}")
    if outputs.error is not None:
        err_console.print(f"[red]error:[/red] {outputs.error}; stopped, {done} completed pass(es) reported",
                          highlight=False)
        return
    if outcome.interrupted:
        closed = "engines were" if outcome.fleet else "engine was"
        err_console.print(f"[yellow]interrupted[/yellow]: the {closed} closed; {done} completed pass(es) reported")
        return
    if outcome.error is not None:
        prefix = "error" if isinstance(outcome.error, EngineStartError) else "engine failed"
        err_console.print(f"[red]{prefix}:[/red] {escape(str(outcome.error))}")
        return
    if outcome.engine_error is not None:
        err_console.print(f"[red]engine failed:[/red] {escape(str(outcome.engine_error))}")
