"""`omni bench`'s options parsed into `BenchArgs` (omnicli.benchmark.entrypoint), vLLM's `bench serve`
flags included (docs/bench.md). A bad value raises `OptionError` naming its option (the command shows it
as a usage error, exit 2) before any engine starts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from omnicli.benchmark.entrypoint import BenchArgs
from omnicli.benchmark.outputs import OutputFormat, ReportPlan, VllmFiles
from omnicli.benchmark.seed_tts_env import seed_tts_eval
from omnicli.benchmark.session import ProfileRun
from omnicli.benchmark.vllm_flags import reason as lookup_flag
from omnicli.engine.request import TTSRequest, field_problem
from omnicli.errors import UsageError
from omnicli.runtime.clock import utc_now

if TYPE_CHECKING:
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.driver import LoadShape
    from omnicli.profile import ResolvedProfile
    from omnicli.runtime.cluster import EngineResources

T = TypeVar("T")
Resolve = Callable[[str | None, list[str] | None], "ResolvedProfile"]  # (profile spec, --set overrides)
KEEP_FAILED_ENV = "OMNI_FAILED_SPEECH_AUDIO_DIR"


class OptionError(UsageError):
    """A bad option value; `option` names the option (`--concurrency`)."""

    def __init__(self, message: str, option: str):
        super().__init__(message)
        self.message = message
        self.option = option


@dataclass
class BenchOptions:
    """`omni bench`'s options as given, one field per option (the command's parameter of that name);
    `bench_args` checks and turns them into `BenchArgs`. The defaults are the command's."""

    # the prompts
    manifest_arg: Path | None = None
    manifest: Path | None = None
    num_prompts: int | None = None
    seed: int = 0
    disable_shuffle: bool = False
    max_new_tokens: int | None = None
    allow_outside_paths: bool = False
    # the load
    concurrency: str | None = None
    request_rate: float | None = None
    burstiness: float = 1.0
    ramp_up_strategy: str | None = None
    ramp_up_start_rps: float | None = None
    ramp_up_end_rps: float | None = None
    warmup: int = 0
    warmup_pass: bool = False
    rounds: int = 1
    # the profiles
    profile: list[str] | None = None
    compare: list[str] | None = None
    interleave: bool = False
    set_: list[str] | None = None
    # what is reported and written
    metric_percentiles: str = "50,90,99"
    percentile_metrics: str | None = None
    save_result: bool = False
    append_result: bool = False
    result_dir: Path | None = None
    result_filename: str | None = None
    label: str | None = None
    metadata: list[str] | None = None
    csv_path: Path | None = None
    output_format: OutputFormat = OutputFormat.table
    save_detailed: bool = False
    plot: Path | None = None
    audio_out: Path | None = None
    eval_metrics: str | None = None
    eval_asr: str | None = None
    keep_failed: Path | None = None
    report_file: Path | None = None
    goodput: list[str] | None = None
    plot_timeline: bool = False
    timeline_itl_thresholds: str = "25,50"
    disable_tqdm: bool = False
    # --ray
    ray: bool = False
    ray_address: str | None = None
    engines: int | None = None
    gpus_per_engine: float | None = None
    cpus_per_engine: float | None = None
    # vLLM-Omni's dataset, request and sampling flags
    dataset_name: str | None = None
    dataset_path: Path | None = None
    seed_tts_locale: str = "en"
    seed_tts_wer_eval: bool = False
    seed_tts_root: Path | None = None
    extra_body: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    output_len: int | None = None
    # vLLM's server flags: accepted, reported as not applying
    backend: str | None = None
    endpoint: str | None = None
    host: str | None = None
    port: str | None = None
    base_url: str | None = None
    model: str | None = None
    tokenizer: str | None = None
    served_model_name: str | None = None
    ready_check_timeout_sec: str | None = None
    trust_remote_code: bool = False


def itl_thresholds(text: str) -> list[float]:
    """vLLM's `--timeline-itl-thresholds 25,50` (ms) -> [0.025, 0.05] s."""
    try:
        values = [float(t) / 1000.0 for t in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not two numbers (ms), e.g. 25,50") from None
    if len(values) != 2:
        raise ValueError(f"{text!r}: give two thresholds (ms), e.g. 25,50")
    return values


@dataclass
class Compat:
    """vLLM-Omni's flags turned into omni's."""

    manifest: Path | None
    max_new_tokens: int | None
    sets: list[str]
    request_fields: dict[str, Any]  # TTSRequest fields each request gets unless its row sets them
    notes: list[str]  # flags accepted and not applying (said once)
    dataset: str | None = None  # vLLM-Omni's dataset name: how the manifest is read


def vllm_compat(
    dataset_name: str | None, dataset_path: Path | None, locale: str, manifest: Path | None, extra_body: str | None,
    output_len: int | None, max_new_tokens: int | None, *, sampling: dict[str, Any], ignored: dict[str, Any],
) -> Compat:
    """vLLM-Omni's dataset, request and sampling flags as omni's manifest, caps and --set
    overrides (usage errors exit 2); server flags are reported once as not applying."""
    notes = []
    given = [flag for flag, value in ignored.items() if value is not None]
    if given:
        notes.append(f"{', '.join(given)}: vLLM server option(s), not applying to the embedded engine (ignored)")
    from omnicli.benchmark.seed_tts_sets import DATASETS, DESIGN_LANGUAGE

    if dataset_name is not None and dataset_name not in DATASETS:
        raise OptionError(f"{dataset_name!r}: omni bench reads the seed-tts datasets ({', '.join(DATASETS)}: "
                          "a meta.lst)", option="--dataset-name")
    if locale not in ("en", "zh"):
        raise OptionError(f"{locale!r}: choose en or zh", option="--seed-tts-locale")
    if dataset_path is not None:
        if manifest is not None:
            raise OptionError("give the manifest either as MANIFEST/--manifest or with --dataset-path, not both",
                              option="--dataset-path")
        if not dataset_path.exists():
            raise OptionError(f"{dataset_path}: no such local folder (omni reads a local copy of the seed-tts-eval "
                              "set: DIR/en/meta.lst, DIR/zh/meta.lst; it downloads nothing)", option="--dataset-path")
        manifest = dataset_path / locale / "meta.lst" if dataset_path.is_dir() else dataset_path
    elif dataset_name is not None:
        raise OptionError(f"--dataset-name {dataset_name} needs --dataset-path DIR (a local seed-tts-eval folder)",
                          option="--dataset-path")
    body: dict[str, Any] = {}
    if extra_body is not None:
        try:
            body = json.loads(extra_body)
        except json.JSONDecodeError as exc:
            raise OptionError(f"not JSON: {exc}", option="--extra-body") from None
        if not isinstance(body, dict):
            raise OptionError("must be a JSON object", option="--extra-body")
    given_caps = (output_len, max_new_tokens, body.pop("max_new_tokens", None), body.pop("max_tokens", None))
    caps = {v for v in given_caps if v is not None}
    if len(caps) > 1:
        raise OptionError(f"different token caps given ({', '.join(map(str, sorted(caps)))})",
                          option="--max-new-tokens")
    cap = caps.pop() if caps else None
    if (why := field_problem("max_new_tokens", cap)) is not None:
        raise OptionError(f"max_new_tokens {why} (got {cap!r:.80})",
                          option="--extra-body" if cap in given_caps[2:] else "--max-new-tokens")
    for key in ("temperature", "top_p", "top_k", "repetition_penalty"):  # vLLM merges sampling flags into the body
        value = body.get(key)
        number = isinstance(value, int if key == "top_k" else (int, float)) and not isinstance(value, bool)
        if value is not None and not number:  # the profile checks the range; the type is named here, as given
            raise OptionError(f"{key} must be {'an integer' if key == 'top_k' else 'a number'} (got {value!r:.80})",
                              option="--extra-body")
        if sampling.get(key) is None and key in body:
            sampling[key] = body.pop(key)
        body.pop(key, None)
    sets = [f"talker.{key}={value}" for key, value in sampling.items() if value is not None]
    not_extras = {"request_id", "text", "ref_audio", "ref_sample_rate", "max_new_tokens"}
    request_keys = {f.name for f in dataclasses.fields(TTSRequest)} - not_extras
    fields = {k: v for k, v in body.items() if k in request_keys}
    for key, value in fields.items():  # copied into every request: a wrong type must stop here, not in vLLM
        if (why := field_problem(key, value)) is not None:
            raise OptionError(f"{key} {why} (got {value!r:.80})", option="--extra-body")
    unused = [k for k in body if k not in request_keys]
    if unused:
        notes.append(f"--extra-body: {', '.join(unused)} not used by omni's requests (ignored)")
    if dataset_name == "seed-tts-design":  # vLLM-Omni's design requests name the locale's language
        fields.setdefault("language", DESIGN_LANGUAGE[locale])
    return Compat(manifest, cap, sets, fields, notes, dataset=dataset_name)


def parsed(parse: Callable[..., T], value: object, hint: str) -> T:
    """`parse(value)`, its ValueError a usage error of option `hint`."""
    try:
        return parse(value)
    except ValueError as exc:
        raise OptionError(str(exc), option=hint) from None


# The option a LoadShape's ValueError is about, by the start of its message.
_SHAPE_HINTS = {"burstiness": "--burstiness", "request rate": "--request-rate", "concurrency": "--concurrency",
                "ramp-up start rate": "--ramp-up-start-rps", "ramp-up end rate": "--ramp-up-end-rps"}


def parse_concurrency(text: str | None) -> list[int | None]:
    """`"1,8,32"` -> [1, 8, 32]; None -> [None] (no cap)."""
    if text is None:
        return [None]
    items = [item.strip() for item in text.split(",") if item.strip()]
    if bad := [item for item in items if not item.isdigit() or int(item) < 1]:
        raise OptionError(f"{bad[0]!r} is not a positive integer", option="--concurrency")
    out: list[int | None] = list(dict.fromkeys(int(item) for item in items))
    if not out:
        raise OptionError("no value given", option="--concurrency")
    return out


def label_profiles(specs: list[str | None], sets: list[str] | None, resolve: Resolve) -> list[ProfileRun]:
    """Resolves each profile (a bad one is a usage error) and gives each a unique label."""
    runs: list[ProfileRun] = []
    seen: dict[str, int] = {}
    for spec in specs:
        resolved = resolve(spec, sets)
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
        raise OptionError("--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy",
                                 option="--ramp-up-strategy")
    if strategy is not None and request_rate is not None and math.isfinite(request_rate):  # said in option names
        raise OptionError("a ramp-up sets the rate: leave --request-rate out (as vLLM)",
                                 option="--ramp-up-strategy")
    rate = math.inf if request_rate is None else request_rate
    open_loop = request_rate is not None or strategy is not None
    levels = parse_concurrency(concurrency if concurrency is not None or open_loop else "1")
    try:
        return [LoadShape(concurrency=c, request_rate=rate, burstiness=burstiness, seed=seed, ramp_up=strategy,
                          ramp_start=start, ramp_end=end) for c in levels]
    except ValueError as exc:
        hint = next((h for word, h in _SHAPE_HINTS.items() if str(exc).startswith(word)), "--ramp-up-strategy")
        raise OptionError(str(exc), option=hint) from None


def vllm_files(o: BenchOptions) -> VllmFiles | None:
    """The --save-result / --plot-timeline options (a bad one exits 2); None without them."""
    from omnicli.benchmark.metrics import parse_goodput
    from omnicli.benchmark.outputs.vllm import timeline_missing
    from omnicli.benchmark.vllm_format import check_filename_template, parse_metadata, parse_percentile_metrics

    save = o.save_result or o.append_result
    metrics = parsed(parse_percentile_metrics, o.percentile_metrics, "--percentile-metrics")
    pairs = parsed(parse_metadata, o.metadata, "--metadata")
    slos = parsed(parse_goodput, o.goodput, "--goodput")
    thresholds = None
    if o.plot_timeline:
        thresholds = parsed(itl_thresholds, o.timeline_itl_thresholds, "--timeline-itl-thresholds")
        if missing := timeline_missing():
            raise OptionError(missing, option="--plot-timeline")
    if save and o.result_filename is not None:
        parsed(check_filename_template, o.result_filename, "--result-filename")
    if not save and thresholds is None:
        return None
    return VllmFiles(o.append_result, o.label, pairs, metrics, goodput=slos, timeline=thresholds, save=save)


def ray_resources(o: BenchOptions, *, refused: dict[str, bool]) -> EngineResources | None:
    """The engines' resources with --ray (None without); options that do not combine exit 2."""
    given = [name for name, value in (("--engines", o.engines), ("--gpus-per-engine", o.gpus_per_engine),
                                      ("--cpus-per-engine", o.cpus_per_engine), ("--ray-address", o.ray_address))
             if value is not None]
    if not o.ray:
        if given:
            raise OptionError(f"{', '.join(given)} need(s) --ray", option=given[0])
        return None
    clash = [name for name, given in refused.items() if given]
    if clash:
        raise OptionError(
            f"{', '.join(clash)} do(es) not combine with --ray (see docs/scale-out.md: run an A/B as two --ray runs; "
            "for audio use omni synth --ray, then omni eval)", option=clash[0],
        )
    from omnicli.runtime.cluster import EngineResources, import_ray

    import_ray()  # RayUnavailable (exit 2, with the install hint)
    cpus = 1.0 if o.cpus_per_engine is None else o.cpus_per_engine
    return EngineResources(engines=o.engines or 1, gpus_per_engine=o.gpus_per_engine or 0.0, cpus_per_engine=cpus)


def plan_eval(metrics: str | None, asr: str | None, audio_out: Path | None, runs: list[ProfileRun], *,
              device: str | None = None, lang: str = "en") -> BenchEval | None:
    """`--eval`: parsed, and every model located, before any engine starts (usage errors exit 2)."""
    if metrics is None:
        if asr is not None:
            raise OptionError("--eval-asr needs --eval", option="--eval-asr")
        return None
    from omnicli.benchmark.evaluation import BenchEval
    from omnicli.errors import UsageError
    from omnicli.evaluation import AsrSetupError
    from omnicli.evaluation.scorers import ScorerSetupError

    if audio_out is None:
        raise OptionError("--eval scores the kept audio: give --audio-out DIR too", option="--eval")
    bench_eval = parsed(lambda text: BenchEval.parse(text, asr=asr, device=device or runs[0].profile.profile.device,
                                                     lang=lang),
                        metrics, "--eval")
    try:
        bench_eval.check()
    except (AsrSetupError, ScorerSetupError) as exc:
        raise UsageError(f"--eval: {exc}") from None
    return bench_eval


def bench_args(o: BenchOptions, *, resolve: Resolve, require_folder: Callable[[Path | None, str], None],
               info: Callable[[str], None], verbose: bool = False) -> BenchArgs:
    """`omni bench`'s options as `BenchArgs`; OptionError / UsageError on bad ones.

    `resolve` loads and checks a profile, `require_folder` rejects an output folder that is a file
    (the command's, shared with synth); `info` gets the notes on flags accepted and ignored."""
    from omnicli.benchmark.metrics import parse_percentiles
    from omnicli.runtime.cluster import RayOptions

    if o.manifest_arg is not None and o.manifest is not None and o.manifest_arg != o.manifest:
        raise OptionError("give the manifest either as argument or with --manifest, not both",
                                 option="MANIFEST")
    dataset_root = o.seed_tts_root or o.dataset_path  # vLLM-Omni: --seed-tts-root wins
    compat = vllm_compat(
        o.dataset_name, dataset_root, o.seed_tts_locale, o.manifest or o.manifest_arg, o.extra_body, o.output_len,
        o.max_new_tokens,
        sampling={"temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k,
                  "repetition_penalty": o.repetition_penalty},
        ignored={"--backend": o.backend, "--endpoint": o.endpoint, "--host": o.host, "--port": o.port,
                 "--base-url": o.base_url, "--model": o.model, "--tokenizer": o.tokenizer,
                 "--served-model-name": o.served_model_name, "--ready-check-timeout-sec": o.ready_check_timeout_sec},
    )
    for line in compat.notes:
        info(line)
    if o.trust_remote_code:
        info(f"--trust-remote-code: {lookup_flag('--trust-remote-code')} (ignored)")
    keep_failed = o.keep_failed
    seed_eval = seed_tts_eval(o.eval_metrics, o.audio_out, o.eval_asr, wer_flag=o.seed_tts_wer_eval,
                              result_dir=o.result_dir, locale=o.seed_tts_locale)  # and vLLM-Omni's SEED_TTS_* vars
    eval_metrics, audio_out = seed_eval.metrics, seed_eval.audio_out
    for line in seed_eval.notes:
        info(line)
    percentiles = parsed(parse_percentiles, o.metric_percentiles, "--metric-percentiles")
    if o.warmup and o.warmup_pass:
        raise OptionError("use --warmup N or --warmup-pass, not both", option="--warmup-pass")
    shapes = load_shapes(o.concurrency, o.request_rate, o.burstiness, o.seed,
                         ramp=(o.ramp_up_strategy, o.ramp_up_start_rps, o.ramp_up_end_rps))
    if o.ray and keep_failed is not None and str(keep_failed) == os.environ.get(KEEP_FAILED_ENV):
        info(f"${KEEP_FAILED_ENV} is ignored with --ray (a Ray bench keeps no audio)")
        keep_failed = None
    resources = ray_resources(o, refused={
        "--compare": bool(o.compare), "--profile (more than one)": len(o.profile or []) > 1,
        "--interleave": o.interleave, "--audio-out": audio_out is not None, "--eval": eval_metrics is not None,
        "--keep-failed": keep_failed is not None, "--save-result": o.save_result or o.append_result,
        "--plot": o.plot is not None, "--plot-timeline": o.plot_timeline,
        "--extra-body " + ",".join(compat.request_fields): bool(compat.request_fields)})
    require_folder(o.result_dir, "--result-dir")
    require_folder(audio_out, "--audio-out")
    specs: list[str | None] = [*o.profile] if o.profile else [None]  # None: the default profile
    specs += o.compare or []
    runs = label_profiles(specs, list(o.set_ or []) + compat.sets, resolve)
    if o.interleave and len(runs) < 2:
        raise OptionError("alternates the rounds of two or more profiles: add --compare B (or a second "
                                 "--profile)", option="--interleave")
    files = vllm_files(o)
    bench_eval = plan_eval(eval_metrics, seed_eval.asr, audio_out, runs, device=seed_eval.device,
                           lang=o.seed_tts_locale)
    report = ReportPlan(
        percentiles, utc_now(), o.save_detailed, o.result_dir, o.result_filename, o.plot, vllm=files,
        csv_path=o.csv_path, console=o.output_format, report_file=o.report_file,
        report_dirs=[p for p in (audio_out, keep_failed) if p is not None], quiet_progress=o.disable_tqdm,
    )
    return BenchArgs(
        runs=runs, shapes=shapes, report=report, manifest=compat.manifest, num_prompts=o.num_prompts, seed=o.seed,
        shuffle=not o.disable_shuffle, max_new_tokens=compat.max_new_tokens,
        allow_outside_paths=o.allow_outside_paths, rounds=o.rounds, warmup=o.warmup, warmup_pass=o.warmup_pass,
        interleave=o.interleave, audio_out=audio_out, keep_failed=keep_failed, bench_eval=bench_eval,
        request_fields=compat.request_fields,
        ray=None if resources is None else RayOptions(resources, o.ray_address, quiet=not verbose),
        dataset=compat.dataset,
    )
