"""`omni bench`: load benchmark with the engine embedded (parse options, print results).

The measuring itself lives in `omnicli.benchmark`; this module turns options
into a plan, renders progress and tables, writes the result files and maps
Ctrl-C / SIGTERM onto the session (the policy `omni synth` uses too).
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from omnicli.benchmark.outputs import OutputFormat, report_passes
from omnicli.benchmark.outputs import ReportPlan as _Report
from omnicli.benchmark.outputs import VllmFiles as _VllmFiles
from omnicli.benchmark.session import BenchObserver, BenchSession, EngineStartError, utc_now
from omnicli.commands.bench_vllm import RequestDefaults, vllm_compat
from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_IO,
    EXIT_USAGE,
    CliConsole,
    QuietOption,
    RequestProgress,
    SetOption,
    VerboseOption,
    err_console,
    note,
    require_folder,
    resolve_profile,
    set_verbosity,
    status,
)
from omnicli.commands.interrupts import EngineRunInterrupts, Phase
from omnicli.commands.report import ReportOption, check_report_option

KEEP_FAILED_ENV = "OMNI_FAILED_SPEECH_AUDIO_DIR"
_VLLM = "vLLM compatibility"
_NOT_APPLYING = "vLLM's server flag: accepted, and ignored (the engine is embedded: no server)."

ProfilesOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--profile",
        "-p",
        help="Preset name (see `omni profiles list`) or path to a YAML file. "
        "Repeat it to A/B several profiles on the same prompts.",
        show_default="default",
    ),
]


def parse_concurrency(text: str | None) -> list[int | None]:
    """`"1,8,32"` -> [1, 8, 32]; None -> [None] (no cap)."""
    if text is None:
        return [None]
    out: list[int | None] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit() or int(item) < 1:
            raise typer.BadParameter(f"{item!r} is not a positive integer", param_hint="--concurrency")
        if int(item) not in out:
            out.append(int(item))
    if not out:
        raise typer.BadParameter("no value given", param_hint="--concurrency")
    return out


def label_profiles(specs: list[str | None], sets: list[str] | None) -> list[Any]:
    """Resolves each profile (a bad one exits 2) and gives each a unique label."""
    from omnicli.benchmark.session import ProfileRun

    runs, seen = [], {}
    for spec in specs:
        resolved = resolve_profile(spec, sets)
        label = resolved.name or spec or "default"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        runs.append(ProfileRun(label, resolved))
    return runs


class _ProgressObserver(BenchObserver):
    """Renders session events: a live bar per phase, messages on stderr; tells `interrupts` the phase."""

    def __init__(self, progress: RequestProgress, outputs: Any, interrupts: EngineRunInterrupts):
        self.progress = progress
        self.outputs = outputs
        self.interrupts = interrupts
        self.warnings: list[str] = []

    def engine_starting(self, run) -> None:
        self.interrupts.phase = Phase.STARTING
        note(f"[bold]starting engine[/bold] for profile {run.label} ({getattr(run.profile, 'digest', '')}) ...")

    def engine_started(self, run, engine) -> None:
        self.interrupts.phase = Phase.RUNNING
        note(
            f"engine ready: {getattr(engine, 'model_name', '?')} on {getattr(engine, 'device', '?')}, "
            f"{engine.sample_rate} Hz"
        )

    def engine_closing(self, run) -> None:
        self.interrupts.phase = Phase.CLOSING

    def phase_start(self, description: str, total: int) -> None:
        self.progress.start(description, total)

    def request_done(self, record) -> None:
        self.progress.done(failed=record.error is not None, audio_seconds=record.audio_duration)

    def phase_end(self) -> None:
        self.progress.end()

    def round_done(self, run, shape, index, result, engine) -> None:
        self.outputs.handle(run, shape, index, result, engine)
        if self.outputs.error is not None:  # the audio folder cannot be written: admit no more work (exit 4)
            self.interrupts.session.stop.set()

    def warning(self, message: str) -> None:
        self.warnings.append(message)
        err_console.print(f"[yellow]warning:[/yellow] {message}")


class _BenchInterrupts(EngineRunInterrupts):
    """Ctrl-C / SIGTERM for one `omni bench` (the policy is shared with `omni synth`).

    The first signal while passes run sets the session's `stop`: nothing more
    is submitted, requests in flight get `grace_s`, the engine is closed and
    the completed passes are reported. Also between profiles (closing one
    engine) it only stops. During an engine start-up, and on a second signal,
    the engine's processes are ended, the completed passes written, exit 130.
    """

    graceful_phases = (Phase.RUNNING, Phase.CLOSING)
    forced_note = "completed passes are kept"

    def __init__(self, session: BenchSession, report: _Report):
        super().__init__()
        self.session = session
        self.report = report
        self.progress: RequestProgress | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def request_stop(self, sig) -> bool:
        loop = self.loop
        if loop is None:
            return False
        try:
            loop.call_soon_threadsafe(self.session.stop.set)
        except RuntimeError:  # the loop closed meanwhile: nothing left to stop gracefully
            return False
        err_console.print(
            f"\n[yellow]{sig.name}[/yellow]: stopping; requests in flight get {self.session.grace_s:g}s to finish, "
            "then the engine is closed and completed passes are reported (again to force)"
        )
        return True

    def save_partial(self) -> None:
        if self.progress is not None:
            self.progress.stop()  # restores the terminal before os._exit
        _report(list(self.session.results), self.report, interrupted=True, unfinished=self.session.unfinished, forced=True)


def _run_session(session: BenchSession, interrupts: _BenchInterrupts) -> BaseException | None:
    """Runs the session on a fresh loop; returns the engine error that ended it, if one did."""
    from omnicli.engine.request import EngineError

    async def main():
        interrupts.loop = asyncio.get_running_loop()
        await session.run()

    try:
        asyncio.run(main())
    except (EngineStartError, EngineError) as exc:  # reported by the caller with the completed passes
        return exc
    finally:
        interrupts.loop = None
    return None


def bench(
    manifest_arg: Annotated[
        Optional[Path],
        typer.Argument(
            metavar="MANIFEST",
            help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text) or JSONL manifest. "
            "Default: the shipped demo set, cycled to --num-prompts.",
            show_default=False,
        ),
    ] = None,
    manifest: Annotated[Optional[Path], typer.Option("--manifest", "-m", help="Same as the MANIFEST argument.")] = None,
    num_prompts: Annotated[
        Optional[int],
        typer.Option("--num-prompts", "-n", min=1, help="Requests per measured pass; prompts cycle when the manifest has fewer.",
                     show_default="all rows; 32 for the demo set"),
    ] = None,
    concurrency: Annotated[
        Optional[str],
        typer.Option("--concurrency", "--max-concurrency", "-c", help="Closed loop: at most N requests in flight. A list (1,8,32,128) runs a sweep, "
                     "one fresh measured pass per value.", show_default="1, or no cap with --request-rate"),
    ] = None,
    request_rate: Annotated[
        Optional[float],
        typer.Option("--request-rate", "-r", help="Open loop: mean arrivals per second (Poisson at burstiness 1); inf submits all at once."),
    ] = None,
    burstiness: Annotated[
        float,
        typer.Option("--burstiness", help="Gamma shape of the inter-arrival times, as vLLM: 1 Poisson, <1 burstier, >1 steadier."),
    ] = 1.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed for prompt shuffling and arrival times.")] = 0,
    disable_shuffle: Annotated[bool, typer.Option("--disable-shuffle", help="Keep the manifest order.")] = False,
    max_new_tokens: Annotated[
        Optional[int], typer.Option("--max-new-tokens", min=1, help="Talker token cap per request.", show_default="profile")
    ] = None,
    warmup: Annotated[int, typer.Option("--warmup", "--num-warmups", min=0, help="Requests run and discarded before measuring (per engine).")] = 0,
    warmup_pass: Annotated[bool, typer.Option("--warmup-pass", help="Run a whole discarded pass before measuring.")] = False,
    rounds: Annotated[
        int, typer.Option("--rounds", min=1, help="Measured passes per load shape, pooled (total audio s / total duration).")
    ] = 1,
    metric_percentiles: Annotated[str, typer.Option("--metric-percentiles", help="Percentiles to report, comma-separated (vLLM's default is 99; the table also shows p50 and p90).")] = "50,90,99",
    percentile_metrics: Annotated[
        Optional[str],
        typer.Option("--percentile-metrics", help="Metrics whose mean/median/std/percentiles go into --save-result files: "
                     "audio_ttfp,e2el,audio_rtf,audio_duration,audio_underrun.", show_default="all"),
    ] = None,
    profile: ProfilesOption = None,
    compare: Annotated[
        Optional[list[str]],
        typer.Option("--compare", help="A profile to A/B against the --profile one(s) (repeatable): same prompts, engine restarted."),
    ] = None,
    interleave: Annotated[
        bool,
        typer.Option("--interleave", help="A/B with --rounds R: alternate the profiles' rounds (A B A B ...), engines "
                     "kept running side by side, and print each metric's median over rounds, its spread and the "
                     "ratio b/a with a bootstrap 90% interval ('no difference measured' when it spans 1.0)."),
    ] = False,
    set_: SetOption = None,
    save_result: Annotated[
        bool, typer.Option("--save-result", help="Write one vLLM `bench serve`-shaped JSON per run (load shape x profile), beside the summary file.")
    ] = False,
    append_result: Annotated[
        bool, typer.Option("--append-result", help="Append the per-run results to an existing file (implies --save-result).")
    ] = False,
    result_dir: Annotated[Optional[Path], typer.Option("--result-dir", help="Folder for the result files (the summary file is written whenever it is given).")] = None,
    result_filename: Annotated[
        Optional[str],
        typer.Option("--result-filename", help="With --save-result: the per-run file's name (several runs need --append-result). "
                     "Without: the summary file's name.",
                     show_default="{label}-{rate}qps-concurrency{N}-{model}-{date}.json; summary omni-bench-<time>.json"),
    ] = None,
    label: Annotated[Optional[str], typer.Option("--label", help="Label (file name prefix) of --save-result files.", show_default="omni")] = None,
    metadata: Annotated[
        Optional[list[str]], typer.Option("--metadata", metavar="KEY=VALUE", help="Recorded as a top-level key of each --save-result file (repeatable).")
    ] = None,
    csv_path: Annotated[Optional[Path], typer.Option("--csv", metavar="FILE", help="Write the results table as CSV: one row per run, raw values.")] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="Console output: a table, plain `Key: value` lines for grep and diff, or the result document as JSON.")
    ] = OutputFormat.table,
    save_detailed: Annotated[bool, typer.Option("--save-detailed", help="Add per-request lists to the result.")] = False,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write a PNG plot (sweep curves or latency histograms).")] = None,
    audio_out: Annotated[
        Optional[Path], typer.Option("--audio-out", help="Keep measured audio as DIR/<utt>.wav (for omni eval-wer).")
    ] = None,
    eval_metrics: Annotated[
        Optional[str],
        typer.Option("--eval", help="After the passes, score the --audio-out audio with omni eval (any of wer,sim,mos) "
                     "and add the figures to the result file."),
    ] = None,
    eval_asr: Annotated[
        Optional[str], typer.Option("--eval-asr", help="ASR for --eval wer, as omni eval --asr.", show_default="openai-whisper:large-v3")
    ] = None,
    keep_failed: Annotated[
        Optional[Path],
        typer.Option("--keep-failed", envvar=KEEP_FAILED_ENV, help="Retain failed or suspect audio here."),
    ] = None,
    allow_outside_paths: Annotated[
        bool, typer.Option("--allow-outside-paths", help="Allow manifest audio paths outside the manifest's folder.")
    ] = False,
    ray: Annotated[
        bool, typer.Option("--ray", help="Run --engines engines on a Ray cluster at once, each with the whole load; "
                           "report each engine and the total (needs the Ray extra: docs/scale-out.md).", rich_help_panel="Scale-out")
    ] = False,
    ray_address: Annotated[
        Optional[str], typer.Option("--ray-address", metavar="auto|HOST:PORT", help="Join this Ray cluster.",
                                    show_default="start a local one", rich_help_panel="Scale-out")
    ] = None,
    engines: Annotated[Optional[int], typer.Option("--engines", min=1, help="With --ray: engines, one per Ray actor.", show_default="1", rich_help_panel="Scale-out")] = None,
    gpus_per_engine: Annotated[
        Optional[float], typer.Option("--gpus-per-engine", min=0, help="With --ray: GPUs each engine's actor reserves.", show_default="0", rich_help_panel="Scale-out")
    ] = None,
    cpus_per_engine: Annotated[
        Optional[float], typer.Option("--cpus-per-engine", min=0, help="With --ray: CPUs each engine's actor reserves.", show_default="1", rich_help_panel="Scale-out")
    ] = None,
    report_file: ReportOption = None,
    # vLLM / vLLM-Omni `bench serve` flags, so their command lines run as they are (docs/bench.md)
    dataset_name: Annotated[Optional[str], typer.Option("--dataset-name", help="vLLM-Omni's dataset: seed-tts (needs --dataset-path).", rich_help_panel=_VLLM)] = None,
    dataset_path: Annotated[Optional[Path], typer.Option("--dataset-path", help="A local seed-tts-eval folder: reads DIR/<--seed-tts-locale>/meta.lst (or a meta.lst itself).", rich_help_panel=_VLLM)] = None,
    seed_tts_locale: Annotated[str, typer.Option("--seed-tts-locale", help="en or zh: the folder of --dataset-path.", rich_help_panel=_VLLM)] = "en",
    extra_body: Annotated[Optional[str], typer.Option("--extra-body", metavar="JSON", help="vLLM's request extras: max_new_tokens/max_tokens, voice, seed, temperature, top_p, top_k, repetition_penalty, and any request field of the family (instruct, language, task_type).", rich_help_panel=_VLLM)] = None,
    temperature: Annotated[Optional[float], typer.Option("--temperature", help="Talker sampling (as --set talker.temperature=).", rich_help_panel=_VLLM)] = None,
    top_p: Annotated[Optional[float], typer.Option("--top-p", help="Talker sampling (as --set talker.top_p=).", rich_help_panel=_VLLM)] = None,
    top_k: Annotated[Optional[int], typer.Option("--top-k", help="Talker sampling (as --set talker.top_k=).", rich_help_panel=_VLLM)] = None,
    repetition_penalty: Annotated[Optional[float], typer.Option("--repetition-penalty", help="Talker sampling (as --set talker.repetition_penalty=).", rich_help_panel=_VLLM)] = None,
    output_len: Annotated[Optional[int], typer.Option("--output-len", "--hf-output-len", min=1, help="Same as --max-new-tokens (vLLM-Omni's per-request max_new_tokens).", rich_help_panel=_VLLM)] = None,
    goodput: Annotated[Optional[list[str]], typer.Option("--goodput", metavar="KEY:VALUE ...", help="SLOs for request_goodput: ttft, tpot, e2el, audio_ttfp (ms) and audio_rtf (ratio); several pairs after one flag, as vLLM.", rich_help_panel=_VLLM)] = None,
    ramp_up_strategy: Annotated[Optional[str], typer.Option("--ramp-up-strategy", metavar="linear|exponential", help="Ramp the arrival rate from --ramp-up-start-rps to --ramp-up-end-rps over the pass, as vLLM.", rich_help_panel=_VLLM)] = None,
    ramp_up_start_rps: Annotated[Optional[float], typer.Option("--ramp-up-start-rps", help="With --ramp-up-strategy: the first request's rate.", rich_help_panel=_VLLM)] = None,
    ramp_up_end_rps: Annotated[Optional[float], typer.Option("--ramp-up-end-rps", help="With --ramp-up-strategy: the last request's rate.", rich_help_panel=_VLLM)] = None,
    plot_timeline: Annotated[bool, typer.Option("--plot-timeline", help="Write each run's request timeline beside its result file (FILE.timeline.html, vLLM's plot; needs plotly).", rich_help_panel=_VLLM)] = False,
    timeline_itl_thresholds: Annotated[str, typer.Option("--timeline-itl-thresholds", help="Two ITL thresholds in ms colouring the timeline.", rich_help_panel=_VLLM)] = "25,50",
    disable_tqdm: Annotated[bool, typer.Option("--disable-tqdm", help="No progress bar.", rich_help_panel=_VLLM)] = False,
    seed_tts_wer_eval: Annotated[bool, typer.Option("--seed-tts-wer-eval", help="Same as --eval wer (with --audio-out, default RESULT_DIR/seed_tts_audio).", rich_help_panel=_VLLM)] = False,
    backend: Annotated[Optional[str], typer.Option("--backend", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    host: Annotated[Optional[str], typer.Option("--host", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    port: Annotated[Optional[str], typer.Option("--port", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    model: Annotated[Optional[str], typer.Option("--model", help=_NOT_APPLYING + " The model is the profile's.", rich_help_panel=_VLLM)] = None,
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    served_model_name: Annotated[Optional[str], typer.Option("--served-model-name", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    ready_check_timeout_sec: Annotated[Optional[str], typer.Option("--ready-check-timeout-sec", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = None,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help=_NOT_APPLYING, rich_help_panel=_VLLM)] = False,
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
    from omnicli.benchmark.audio_out import RoundOutputs
    from omnicli.benchmark.metrics import parse_percentiles
    from omnicli.benchmark.session import BenchPlan
    from omnicli.retention import Retainer

    # options -> plan (usage errors exit 2)
    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    if manifest_arg is not None and manifest is not None and manifest_arg != manifest:
        raise typer.BadParameter("give the manifest either as argument or with --manifest, not both", param_hint="MANIFEST")
    compat = vllm_compat(
        dataset_name, dataset_path, seed_tts_locale, manifest or manifest_arg, extra_body, output_len, max_new_tokens,
        sampling={"temperature": temperature, "top_p": top_p, "top_k": top_k, "repetition_penalty": repetition_penalty},
        ignored={"--backend": backend, "--endpoint": endpoint, "--host": host, "--port": port, "--base-url": base_url,
                 "--model": model, "--tokenizer": tokenizer, "--served-model-name": served_model_name,
                 "--ready-check-timeout-sec": ready_check_timeout_sec, "--trust-remote-code": trust_remote_code or None},
    )
    manifest, manifest_arg, max_new_tokens = compat.manifest, None, compat.max_new_tokens
    set_ = list(set_ or []) + compat.sets
    if seed_tts_wer_eval:  # vLLM-Omni's WER pass is omni eval's wer, on the kept audio
        eval_metrics = "wer" if not eval_metrics else ",".join(dict.fromkeys([*eval_metrics.split(","), "wer"]))
        audio_out = audio_out or (result_dir or Path(".")) / "seed_tts_audio"
    try:
        percentiles = parse_percentiles(metric_percentiles)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metric-percentiles") from None
    if warmup and warmup_pass:
        raise typer.BadParameter("use --warmup N or --warmup-pass, not both", param_hint="--warmup-pass")
    shapes = load_shapes(concurrency, request_rate, burstiness, seed, ramp=(ramp_up_strategy, ramp_up_start_rps, ramp_up_end_rps))
    if ray and keep_failed is not None and str(keep_failed) == os.environ.get(KEEP_FAILED_ENV):
        note(f"${KEEP_FAILED_ENV} is ignored with --ray (a Ray bench keeps no audio)")
        keep_failed = None
    resources = _ray_resources(
        ray, engines, gpus_per_engine, cpus_per_engine, ray_address,
        refused={"--compare": bool(compare), "--profile (more than one)": len(profile or []) > 1, "--interleave": interleave,
                 "--audio-out": audio_out is not None, "--eval": eval_metrics is not None,
                 "--keep-failed": keep_failed is not None, "--save-result": save_result or append_result,
                 "--plot": plot is not None, "--plot-timeline": plot_timeline,
                 "--extra-body " + ",".join(compat.request_fields): bool(compat.request_fields)},
    )
    require_folder(result_dir, "--result-dir")
    require_folder(audio_out, "--audio-out")
    runs = label_profiles(list(profile or [None]) + list(compare or []), set_)
    if interleave and len(runs) < 2:
        raise typer.BadParameter("alternates the rounds of two or more profiles: add --compare B (or a second --profile)",
                                 param_hint="--interleave")
    vllm_files = _vllm_files(
        save_result or append_result, append_result, label, metadata, percentile_metrics,
        goodput=goodput, timeline=timeline_itl_thresholds if plot_timeline else None, result_filename=result_filename,
    )
    bench_eval = _plan_eval(eval_metrics, eval_asr, audio_out, runs)
    prompt_set = _prompts(
        manifest or manifest_arg, num_prompts=num_prompts, seed=seed, shuffle=not disable_shuffle,
        max_new_tokens=max_new_tokens, allow_outside_paths=allow_outside_paths,
    )
    outputs = RoundOutputs(audio_out, Retainer.from_option(keep_failed), one_pass=len(runs) * len(shapes) == 1)
    plan = BenchPlan(shapes=shapes, rounds=rounds, warmup_requests=warmup, warmup_pass=warmup_pass, keep_pcm=outputs.needs_pcm,
                     interleave=interleave)
    report = _Report(
        percentiles, utc_now(), save_detailed, result_dir, result_filename, plot,
        vllm=vllm_files, csv_path=csv_path, console=output_format,
        report_file=report_file, report_dirs=[p for p in (audio_out, keep_failed) if p is not None],
    )
    report.quiet_progress = disable_tqdm
    note(
        f"{len(prompt_set.prompts)} prompts from {prompt_set.source} ({prompt_set.num_rows} rows); "
        f"{len(runs)} profile(s) x {len(shapes)} load shape(s) x {rounds} round(s)"
        + (", rounds alternating between the profiles" if interleave else "")
    )
    if interleave and rounds < 3:
        note(f"--interleave with {rounds} round(s): medians and ratios only; an interval needs --rounds 3 or more")
    _check_outputs(report, outputs)
    # run -> report
    if resources is not None:
        from omnicli.commands.bench_ray import run_ray_bench

        run_ray_bench(runs[0], prompt_set.prompts, plan, report, address=ray_address, resources=resources)
    session = BenchSession(runs, prompt_set.prompts, plan, _engine_starter(compat.request_fields))
    interrupts = _BenchInterrupts(session, report)
    error, code = _run_and_report(session, interrupts, outputs, report, bench_eval)
    _exit(session, interrupts, outputs, error, code)


def _ray_resources(ray: bool, engines, gpus, cpus, address, *, refused: dict[str, bool]):
    """The engines' resources with --ray (None without); options that do not combine exit 2."""
    if not ray:
        given = [name for name, value in (("--engines", engines), ("--gpus-per-engine", gpus),
                                          ("--cpus-per-engine", cpus), ("--ray-address", address)) if value is not None]
        if given:
            raise typer.BadParameter(f"{', '.join(given)} need(s) --ray", param_hint=given[0])
        return None
    clash = [name for name, given in refused.items() if given]
    if clash:
        raise typer.BadParameter(
            f"{', '.join(clash)} do(es) not combine with --ray (see docs/scale-out.md: run an A/B as two --ray runs; "
            "for audio use omni synth --ray, then omni eval)", param_hint=clash[0],
        )
    from omnicli.scaleout.cluster import EngineResources, import_ray

    import_ray()  # RayUnavailable (exit 2, with the install hint)
    return EngineResources(engines=engines or 1, gpus_per_engine=gpus or 0.0, cpus_per_engine=1.0 if cpus is None else cpus)


def load_shapes(concurrency: str | None, request_rate: float | None, burstiness: float, seed: int,
                ramp: tuple[str | None, float | None, float | None] = (None, None, None)) -> list:
    """The load shapes of the options: one per --concurrency value, at --request-rate (all at once without),
    or ramped (--ramp-up-strategy, START, END: open loop, no cap without -c)."""
    from omnicli.driver import LoadShape
    from omnicli.driver.load import MIN_REQUEST_RATE

    if request_rate is not None and (math.isnan(request_rate) or request_rate < MIN_REQUEST_RATE):
        raise typer.BadParameter(f"must be at least {MIN_REQUEST_RATE:g} (one request per {1 / MIN_REQUEST_RATE:g} s), or inf", param_hint="--request-rate")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise typer.BadParameter("must be a finite number > 0", param_hint="--burstiness")
    strategy, start, end = ramp
    if strategy is None and (start is not None or end is not None):
        raise typer.BadParameter("--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy", param_hint="--ramp-up-strategy")
    if strategy is not None and request_rate is not None and math.isfinite(request_rate):
        raise typer.BadParameter("a ramp-up sets the rate: leave --request-rate out (as vLLM)", param_hint="--ramp-up-strategy")
    rate = math.inf if request_rate is None else request_rate
    open_loop = request_rate is not None or strategy is not None
    levels = parse_concurrency(concurrency if concurrency is not None or open_loop else "1")
    try:
        return [LoadShape(concurrency=c, request_rate=rate, burstiness=burstiness, seed=seed, ramp_up=strategy,
                          ramp_start=start, ramp_end=end) for c in levels]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--ramp-up-strategy") from None


def _vllm_files(
    save: bool, append: bool, label: str | None, metadata: list[str] | None, percentile_metrics: str | None, *,
    goodput: list[str] | None = None, timeline: str | None = None, result_filename: str | None = None,
) -> _VllmFiles | None:
    """The --save-result / --plot-timeline options (a bad one exits 2); None without them."""
    from omnicli.benchmark.metrics import parse_goodput
    from omnicli.benchmark.vllm_format import check_filename_template, parse_metadata, parse_percentile_metrics
    from omnicli.commands.bench_vllm import itl_thresholds, timeline_missing

    def parsed(parse, value, hint):
        try:
            return parse(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=hint) from None

    metrics = parsed(parse_percentile_metrics, percentile_metrics, "--percentile-metrics")
    pairs = parsed(parse_metadata, metadata, "--metadata")
    slos = parsed(parse_goodput, goodput, "--goodput")
    thresholds = None if timeline is None else parsed(itl_thresholds, timeline, "--timeline-itl-thresholds")
    if thresholds is not None and (missing := timeline_missing()):
        raise typer.BadParameter(missing, param_hint="--plot-timeline")
    if save and result_filename is not None:
        parsed(check_filename_template, result_filename, "--result-filename")
    if not save and thresholds is None:
        return None
    return _VllmFiles(append, label, pairs, metrics, goodput=slos, timeline=thresholds, save=save)


def _engine_starter(request_fields: dict[str, Any]):
    """`_start_engine`, its requests given `request_fields` (--extra-body) where their row leaves them unset."""
    if not request_fields:
        return lambda resolved: _start_engine(resolved)

    async def start(resolved):
        return RequestDefaults(await _start_engine(resolved), request_fields)

    return start


def _prompts(manifest: Path | None, **options):
    """The prompt set (reference audio loaded before any timing); bad input exits 2."""
    from omnicli.benchmark.prompts import load_prompts
    from omnicli.manifest import ManifestError

    try:
        prompt_set = load_prompts(manifest, **options)
    except (ManifestError, FileNotFoundError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    if prompt_set.errors:
        err_console.print(f"[red]error:[/red] {len(prompt_set.errors)} unusable row(s) in {prompt_set.source}:")
        for line in prompt_set.errors[:20]:
            err_console.print(f"  {line}")
        if len(prompt_set.errors) > 20:
            err_console.print(f"  ... and {len(prompt_set.errors) - 20} more")
        err_console.print("fix or remove them: a benchmark over a silently reduced prompt set would mislead")
        raise typer.Exit(EXIT_USAGE)
    if not prompt_set.prompts:
        err_console.print(f"[red]error:[/red] {prompt_set.source}: no prompts")
        raise typer.Exit(EXIT_USAGE)
    return prompt_set


def _run_and_report(
    session: BenchSession, interrupts: _BenchInterrupts, outputs, report: _Report, bench_eval: Any = None,
) -> tuple[BaseException | None, int]:
    """Runs the session under a progress bar and signal handling, scores its audio (--eval), then reports
    whatever completed."""
    with interrupts.signals():
        with RequestProgress(CliConsole(stderr=True, quiet=True) if report.quiet_progress else err_console) as progress:
            interrupts.progress = progress
            session.observer = observer = _ProgressObserver(progress, outputs, interrupts)
            outputs.warn = observer.warning
            error = _run_session(session, interrupts)
            interrupts.phase = Phase.DONE  # from here on a signal changes nothing: the results follow at once
        if bench_eval is not None and error is None and not interrupts.interrupted and outputs.error is None:
            # A signal while scoring writes the benchmark (with the passes scored so far) and exits 130.
            interrupts.phase = Phase.SCORING
            _score_passes(bench_eval, session, outputs, session.prompts, report)
            interrupts.phase = Phase.DONE
        with interrupts.save_lock:
            code = _report(
                session.results, report, interrupted=interrupts.interrupted, unfinished=session.unfinished,
                # a stop the user asked for is not an engine error (a terminal's Ctrl-C makes vLLM abort)
                engine_error=None if error is None or interrupts.interrupted else str(error),
            )
    return error, code


def _exit(session: BenchSession, interrupts: _BenchInterrupts, outputs, error: BaseException | None, code: int) -> None:
    if outputs.audio_dir is not None:
        err_console.print(f"{outputs.wavs_written} wav file(s) in {outputs.audio_dir}")
    if outputs.retainer is not None and outputs.retained:
        err_console.print(f"{outputs.retained} output(s) retained in {outputs.retainer.directory}")
    if outputs.error is not None:
        err_console.print(f"[red]error:[/red] {outputs.error}; stopped, {len(session.results)} completed pass(es) reported", highlight=False)
        raise typer.Exit(EXIT_OUTPUT_IO)
    if interrupts.interrupted:
        err_console.print(f"[yellow]interrupted[/yellow]: the engine was closed; {len(session.results)} completed pass(es) reported")
        raise typer.Exit(EXIT_INTERRUPTED)
    if error is not None:
        prefix = "error" if isinstance(error, EngineStartError) else "engine failed"
        err_console.print(f"[red]{prefix}:[/red] {error}")
        raise typer.Exit(EXIT_ENGINE)
    raise typer.Exit(code)


def _check_outputs(report: _Report, outputs: Any) -> None:
    """Every path the run will write, checked before any engine starts (exit 2): results
    that cannot be written at the end would waste the whole benchmark."""
    folders = [("--result-dir", report.path.parent if report.path is not None else None),
               ("--save-result", (report.result_dir or Path(".")) if report.vllm is not None else None),
               ("--csv", report.csv_path.parent if report.csv_path is not None else None),
               ("--plot", report.plot.parent if report.plot is not None else None)]
    for option, path in (("--csv", report.csv_path), ("--plot", report.plot)):
        if path is not None and path.is_dir():
            err_console.print(f"[red]error:[/red] {option} {path}: is a folder; give a file name", highlight=False)
            raise typer.Exit(EXIT_USAGE)
    from omnicli.atomic import folder_write_error

    problems = [f"{option}: {why}" for option, folder in folders if folder is not None and (why := folder_write_error(folder))]
    if (why := outputs.check()) is not None:
        problems.append(f"--audio-out: {why}")
    if problems:
        for line in problems:
            err_console.print(f"[red]error:[/red] {line}", highlight=False)
        raise typer.Exit(EXIT_USAGE)


def _plan_eval(metrics: str | None, asr: str | None, audio_out: Path | None, runs: list) -> Any:
    """`--eval`: parsed, and every model located, before any engine starts (usage errors exit 2)."""
    if metrics is None:
        if asr is not None:
            raise typer.BadParameter("--eval-asr needs --eval", param_hint="--eval-asr")
        return None
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.evaluation import AsrSetupError
    from omnicli.evaluation.scorers import ScorerSetupError

    if audio_out is None:
        raise typer.BadParameter("--eval scores the kept audio: give --audio-out DIR too", param_hint="--eval")
    try:
        bench_eval = BenchEval.parse(metrics, asr=asr, device=runs[0].profile.profile.device)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--eval") from None
    try:
        bench_eval.check()
    except (AsrSetupError, ScorerSetupError) as exc:
        err_console.print(f"[red]error:[/red] --eval: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    return bench_eval


def _score_passes(bench_eval: Any, session: BenchSession, outputs: Any, prompts: Sequence, report: _Report) -> None:
    """Scores each completed pass's audio; a failure is reported in that pass's entry, never fatal."""
    for result in session.results:
        folder = outputs.pass_dir(result.profile, result.shape)
        if outputs.unwritten.get(folder):  # scoring the clips that are there would mislead
            figures = {"metrics": list(bench_eval.metrics), "error": f"{outputs.unwritten[folder]} clip(s) could not be written to {folder}: not scored"}
            err_console.print(f"[yellow]warning:[/yellow] --eval of {result.label}: {figures['error']}", highlight=False)
            report.extras[result.label] = {"eval": figures}
            continue
        try:
            with status(f"scoring {result.label} ({','.join(bench_eval.metrics)}) ..."):
                figures = bench_eval.score_pass(folder, prompts, result.profile.profile)
        except Exception as exc:
            figures = {"metrics": list(bench_eval.metrics), "error": f"{type(exc).__name__}: {exc}"}
            err_console.print(f"[yellow]warning:[/yellow] --eval of {result.label} failed: {figures['error']}")
        report.extras[result.label] = {"eval": figures}
        shown = {k: figures.get(k) for k in ("seed_wer_mean", "sim_mean", "sim_backend", "dnsmos_ovrl_mean", "utmos_mean")}
        note(f"eval {result.label}: " + ", ".join(f"{k} {v}" for k, v in shown.items() if v is not None))


async def _start_engine(resolved):
    from omnicli.engine.backends import start_engine  # the engine (vLLM) is imported only when started

    return await start_engine(resolved)


def _report(results, report: _Report, **how: Any) -> int:
    """The report of the completed passes: `omnicli.benchmark.outputs.report_passes` (its keywords)."""
    return report_passes(results, report, **how)
