"""`omni bench`'s options parsed into `BenchArgs` (omnicli.benchmark.entrypoint); a bad one exits 2, named."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import typer

from omnicli.benchmark.entrypoint import BenchArgs, RayArgs
from omnicli.benchmark.finish import OutputFormat, _Report, _VllmFiles
from omnicli.benchmark.session import ProfileRun, utc_now
from omnicli.commands.bench_options import KEEP_FAILED_ENV
from omnicli.commands.bench_vllm import parsed, vllm_compat
from omnicli.commands.common import VERBOSITY, note, require_folder, resolve_profile

if TYPE_CHECKING:
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.driver import LoadShape
    from omnicli.scaleout.cluster import EngineResources

# The option a LoadShape's ValueError is about, by the start of its message.
_SHAPE_HINTS = {"burstiness": "--burstiness", "request rate": "--request-rate", "concurrency": "--concurrency"}


def parse_concurrency(text: str | None) -> list[int | None]:
    """`"1,8,32"` -> [1, 8, 32]; None -> [None] (no cap)."""
    if text is None:
        return [None]
    items = [item.strip() for item in text.split(",") if item.strip()]
    if bad := [item for item in items if not item.isdigit() or int(item) < 1]:
        raise typer.BadParameter(f"{bad[0]!r} is not a positive integer", param_hint="--concurrency")
    out: list[int | None] = list(dict.fromkeys(int(item) for item in items))
    if not out:
        raise typer.BadParameter("no value given", param_hint="--concurrency")
    return out


def label_profiles(specs: list[str | None], sets: list[str] | None) -> list[ProfileRun]:
    """Resolves each profile (a bad one exits 2) and gives each a unique label."""
    runs: list[ProfileRun] = []
    seen: dict[str, int] = {}
    for spec in specs:
        resolved = resolve_profile(spec, sets)
        label = resolved.name or spec or "default"
        seen[label] = count = seen.get(label, 0) + 1
        runs.append(ProfileRun(label if count == 1 else f"{label}#{count}", resolved))
    return runs


def load_shapes(concurrency: str | None, request_rate: float | None, burstiness: float, seed: int,
                ramp: tuple[str | None, float | None, float | None] = (None, None, None)) -> list[LoadShape]:
    """The load shapes of the options: one per --concurrency value, at --request-rate (all at once without),
    or ramped (--ramp-up-strategy, START, END: open loop, no cap without -c). `LoadShape` checks the values."""
    import math

    from omnicli.driver import LoadShape

    strategy, start, end = ramp
    if strategy is None and (start is not None or end is not None):
        raise typer.BadParameter("--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy",
                                 param_hint="--ramp-up-strategy")
    if strategy is not None and request_rate is not None and math.isfinite(request_rate):  # said in option names
        raise typer.BadParameter("a ramp-up sets the rate: leave --request-rate out (as vLLM)",
                                 param_hint="--ramp-up-strategy")
    rate = math.inf if request_rate is None else request_rate
    open_loop = request_rate is not None or strategy is not None
    levels = parse_concurrency(concurrency if concurrency is not None or open_loop else "1")
    try:
        return [LoadShape(concurrency=c, request_rate=rate, burstiness=burstiness, seed=seed, ramp_up=strategy,
                          ramp_start=start, ramp_end=end) for c in levels]
    except ValueError as exc:
        hint = next((h for word, h in _SHAPE_HINTS.items() if str(exc).startswith(word)), "--ramp-up-strategy")
        raise typer.BadParameter(str(exc), param_hint=hint) from None


def vllm_files(o: SimpleNamespace) -> _VllmFiles | None:
    """The --save-result / --plot-timeline options (a bad one exits 2); None without them."""
    from omnicli.benchmark.metrics import parse_goodput
    from omnicli.benchmark.vllm_format import check_filename_template, parse_metadata, parse_percentile_metrics
    from omnicli.commands.bench_vllm import itl_thresholds, timeline_missing

    save = o.save_result or o.append_result
    metrics = parsed(parse_percentile_metrics, o.percentile_metrics, "--percentile-metrics")
    pairs = parsed(parse_metadata, o.metadata, "--metadata")
    slos = parsed(parse_goodput, o.goodput, "--goodput")
    thresholds = None
    if o.plot_timeline:
        thresholds = parsed(itl_thresholds, o.timeline_itl_thresholds, "--timeline-itl-thresholds")
        if missing := timeline_missing():
            raise typer.BadParameter(missing, param_hint="--plot-timeline")
    if save and o.result_filename is not None:
        parsed(check_filename_template, o.result_filename, "--result-filename")
    if not save and thresholds is None:
        return None
    return _VllmFiles(o.append_result, o.label, pairs, metrics, goodput=slos, timeline=thresholds, save=save)


def ray_resources(o: SimpleNamespace, *, refused: dict[str, bool]) -> EngineResources | None:
    """The engines' resources with --ray (None without); options that do not combine exit 2."""
    given = [name for name, value in (("--engines", o.engines), ("--gpus-per-engine", o.gpus_per_engine),
                                      ("--cpus-per-engine", o.cpus_per_engine), ("--ray-address", o.ray_address))
             if value is not None]
    if not o.ray:
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
    cpus = 1.0 if o.cpus_per_engine is None else o.cpus_per_engine
    return EngineResources(engines=o.engines or 1, gpus_per_engine=o.gpus_per_engine or 0.0, cpus_per_engine=cpus)


def plan_eval(metrics: str | None, asr: str | None, audio_out: Path | None, runs: list[ProfileRun]) -> BenchEval | None:
    """`--eval`: parsed, and every model located, before any engine starts (usage errors exit 2)."""
    if metrics is None:
        if asr is not None:
            raise typer.BadParameter("--eval-asr needs --eval", param_hint="--eval-asr")
        return None
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.errors import UsageError
    from omnicli.evaluation import AsrSetupError
    from omnicli.evaluation.scorers import ScorerSetupError

    if audio_out is None:
        raise typer.BadParameter("--eval scores the kept audio: give --audio-out DIR too", param_hint="--eval")
    bench_eval = parsed(lambda text: BenchEval.parse(text, asr=asr, device=runs[0].profile.profile.device),
                        metrics, "--eval")
    try:
        bench_eval.check()
    except (AsrSetupError, ScorerSetupError) as exc:
        raise UsageError(f"--eval: {exc}") from None
    return bench_eval


def bench_args(o: SimpleNamespace) -> BenchArgs:
    """The command's options (its parameters, by name) as `BenchArgs`; usage errors exit 2."""
    from omnicli.benchmark.metrics import parse_percentiles

    if o.manifest_arg is not None and o.manifest is not None and o.manifest_arg != o.manifest:
        raise typer.BadParameter("give the manifest either as argument or with --manifest, not both",
                                 param_hint="MANIFEST")
    compat = vllm_compat(
        o.dataset_name, o.dataset_path, o.seed_tts_locale, o.manifest or o.manifest_arg, o.extra_body, o.output_len,
        o.max_new_tokens,
        sampling={"temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k,
                  "repetition_penalty": o.repetition_penalty},
        ignored={"--backend": o.backend, "--endpoint": o.endpoint, "--host": o.host, "--port": o.port,
                 "--base-url": o.base_url, "--model": o.model, "--tokenizer": o.tokenizer,
                 "--served-model-name": o.served_model_name, "--ready-check-timeout-sec": o.ready_check_timeout_sec,
                 "--trust-remote-code": o.trust_remote_code or None},
    )
    eval_metrics, audio_out, keep_failed = o.eval_metrics, o.audio_out, o.keep_failed
    if o.seed_tts_wer_eval:  # vLLM-Omni's WER pass is omni eval's wer, on the kept audio
        eval_metrics = "wer" if not eval_metrics else ",".join(dict.fromkeys([*eval_metrics.split(","), "wer"]))
        audio_out = audio_out or (o.result_dir or Path(".")) / "seed_tts_audio"
    percentiles = parsed(parse_percentiles, o.metric_percentiles, "--metric-percentiles")
    if o.warmup and o.warmup_pass:
        raise typer.BadParameter("use --warmup N or --warmup-pass, not both", param_hint="--warmup-pass")
    shapes = load_shapes(o.concurrency, o.request_rate, o.burstiness, o.seed,
                         ramp=(o.ramp_up_strategy, o.ramp_up_start_rps, o.ramp_up_end_rps))
    if o.ray and keep_failed is not None and str(keep_failed) == os.environ.get(KEEP_FAILED_ENV):
        note(f"${KEEP_FAILED_ENV} is ignored with --ray (a Ray bench keeps no audio)")
        keep_failed = None
    resources = ray_resources(o, refused={
        "--compare": bool(o.compare), "--profile (more than one)": len(o.profile or []) > 1,
        "--interleave": o.interleave, "--audio-out": audio_out is not None, "--eval": eval_metrics is not None,
        "--keep-failed": keep_failed is not None, "--save-result": o.save_result or o.append_result,
        "--plot": o.plot is not None, "--plot-timeline": o.plot_timeline,
        "--extra-body " + ",".join(compat.request_fields): bool(compat.request_fields)})
    require_folder(o.result_dir, "--result-dir")
    require_folder(audio_out, "--audio-out")
    runs = label_profiles(list(o.profile or [None]) + list(o.compare or []), list(o.set_ or []) + compat.sets)
    if o.interleave and len(runs) < 2:
        raise typer.BadParameter("alternates the rounds of two or more profiles: add --compare B (or a second "
                                 "--profile)", param_hint="--interleave")
    files = vllm_files(o)
    bench_eval = plan_eval(eval_metrics, o.eval_asr, audio_out, runs)
    report = _Report(
        percentiles, utc_now(), o.save_detailed, o.result_dir, o.result_filename, o.plot, vllm=files,
        csv_path=o.csv_path, text=o.output_format is OutputFormat.text, report_file=o.report_file,
        report_dirs=[p for p in (audio_out, keep_failed) if p is not None], quiet_progress=o.disable_tqdm,
    )
    return BenchArgs(
        runs=runs, shapes=shapes, report=report, manifest=compat.manifest, num_prompts=o.num_prompts, seed=o.seed,
        shuffle=not o.disable_shuffle, max_new_tokens=compat.max_new_tokens,
        allow_outside_paths=o.allow_outside_paths, rounds=o.rounds, warmup=o.warmup, warmup_pass=o.warmup_pass,
        interleave=o.interleave, audio_out=audio_out, keep_failed=keep_failed, bench_eval=bench_eval,
        request_fields=compat.request_fields,
        ray=None if resources is None else RayArgs(o.ray_address, resources, quiet=not VERBOSITY.verbose),
    )
