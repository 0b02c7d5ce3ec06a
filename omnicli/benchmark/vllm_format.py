"""Per-run result files shaped like `vllm bench serve --save-result` writes them.

One flat JSON object per measured run (one load shape of one profile), with
the keys vLLM and vLLM-Omni write, in their units and with their defaults
(a statistic without samples is 0.0, as vLLM's `np.mean(x or 0)` gives, and
`num_<metric>_samples` says how many there were): `date`, `backend`, `label`,
`model_id`, `num_prompts`, `request_rate`, `max_concurrency`, `duration`,
`completed`, `request_goodput`, `latencies`, `queue_times`, the
`mean_/median_/std_/pNN_` statistics of every selected metric (vLLM's
`ttft`, `tpot`, `itl`, `e2el`; vLLM-Omni's `audio_ttfp`, `audio_rtf`,
`audio_duration`; omni's `audio_underrun`), vLLM-Omni's `audio_throughput`,
`total_audio_duration_s` and `total_audio_frames`. Where a value cannot mean
what it means in vLLM (there are no text tokens here; TTFT is the talker's),
`key_notes` in the file says what it holds; omni's own figures (talker token
counts, codec counters, ...) keep omni's names. `--metadata KEY=VALUE` pairs
become top-level keys, as in vLLM.

The input is a finished run as the summary document holds it plus the vLLM
figures of its records (`omnicli.benchmark.metrics.vllm_figures`); nothing
here measures anything.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omnicli.atomic import write_text_atomic
from omnicli.benchmark.metrics import DISTRIBUTIONS, percentile_key

BACKEND = "omni"  # vLLM's `--backend`: here the engine embedded in this process tree
METRIC_NAMES = tuple(stem for stem, _, _ in DISTRIBUTIONS)
# Extras carried over from omni's run under their own names (not in vLLM's file).
EXTRA_KEYS = (
    "omni_version", "started_at", "profile_label", "profile_name", "profile_digest", "device", "sample_rate",
    "seed", "rounds", "warmup_requests", "warmup_failed", "round_durations", "num_nonempty_audio",
    "num_empty_audio", "num_hit_cap", "num_ref_hot", "num_ref_cold",
    "talker_tokens_per_s", "codec_steps", "codec_frames", "mean_codec_batch_size", "coalescing_waits",
    "coalescing_wait_ms", "codec_ring_headroom", "machine", "failures",
    "eval",  # with `omni bench --eval`: omni eval's figures on the run's audio
)
# vLLM-Omni's engine: the pass's per-stage figures (omnicli/benchmark/stage_metrics.py). omni's own names:
# vLLM-Omni's bench writes `stage_durations` and its stages report `stage_gen_time_ms`; none is reused.
STAGE_KEYS = (
    "stage_talker_tokens_mean", "stage_talker_time_ms_mean", "stage_talker_first_output_ms_mean",
    "stage_codec_frames_mean", "stage_codec_time_ms_mean", "stage_codec_first_output_ms_mean",
    "stage_talker_busy_s", "stage_talker_cpu_s", "stage_talker_cpu_s_per_audio_s",
    "stage_codec_busy_s", "stage_codec_cpu_s", "stage_codec_cpu_s_per_audio_s",
)
# The note written beside them (only into files of runs that have them).
STAGE_NOTE = ("stage_codec_cpu_s", (
    "stage_<stage>_cpu_s: CPU seconds of the stage's processes during this run (its compute; waiting costs none; "
    "several threads may exceed the duration); stage_<stage>_busy_s: wall seconds the stage held at least one "
    "request; stage_<stage>_time_ms_mean: a request's wall time in the stage, waiting for the previous stage "
    "included"))
# Per-request lists kept only with --save-detailed (vLLM drops its own without it).
DETAILED_KEYS = ("utts", "request_rounds", "audio_ttfps", "e2els", "audio_durations", "audio_rtfs",
                 "audio_underruns", "ref_caches", "finish_reasons")
VLLM_DETAILED_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times")
# What a key holds where that is not what vLLM / vLLM-Omni would put there (written into every file).
KEY_NOTES = {
    "ttft": "ttft/tpot/itl are the talker's (stage 0) tokens: first talker output - submission, (last - first "
            "output) / (tokens - 1), gaps between talker outputs; vLLM-Omni's speech endpoint reports the first "
            "audio packet as ttft, which is audio_ttfp here",
    "total_input_tokens": "0: no text tokens are counted (the talker's prompt, reference codes included, is "
                          "talker_prompt_tokens)",
    "total_output_tokens": "0, and output_throughput and total_token_throughput 0.0, as vLLM-Omni's speech endpoint "
                           "reports them (it streams audio, not tokens); talker tokens are talker_output_tokens and "
                           "talker_output_throughput",
    "num_prompts": "requests measured: prompts_per_round x rounds",
    "completed": "requests that produced audio; failed counts those without (vLLM-Omni's speech endpoint answers "
                 "400 'did not produce audio output'), as num_empty_audio does",
    "max_output_tokens_per_s": "talker outputs in the busiest second",
    "rtfx": "0.0: vLLM's ASR figure (input audio transcribed per second); nothing is transcribed here",
    "start_times": "seconds from the round's first submission (vLLM writes perf_counter values)",
    "input_lens": "talker prompt tokens; output_lens: talker tokens (0 for a failed request)",
    "seed_tts_content_error_mean": "with --eval wer / --seed-tts-wer-eval: omni eval's seed_wer_mean / 100 "
                                   "(seed-tts-eval's WER, empty transcripts counted as 1.0), over "
                                   "seed_tts_content_evaluated",
    "seed_tts_sim_mean": "with --eval sim: omni eval's speaker similarity (its backend: eval.sim_backend), not "
                         "vLLM-Omni's WavLM model; seed_tts_utmos_* only with omni eval's utmos MOS backend; DNSMOS "
                         "is seed_tts_dnsmos_ovrl_*, never under a UTMOS key",
}


def parse_metadata(items: Iterable[str] | None) -> dict[str, str]:
    """`["version=0.3", "tp=1"]` -> {"version": "0.3", "tp": "1"}: vLLM splits at the first '='
    and strips both sides. Raises ValueError naming the bad item, or one that overrides a key of the
    file's own with a value not of its type (`num_prompts=abc`)."""
    from omnicli.benchmark.result_models import metadata_problem

    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{item!r} is not KEY=VALUE")
        if (problem := metadata_problem(key.strip(), value.strip())) is not None:
            raise ValueError(f"{item!r}: {problem}")
        out[key.strip()] = value.strip()
    return out


def parse_percentile_metrics(text: str | None) -> list[str]:
    """`"ttft,e2el,audio_ttfp"` -> the metric stems to report statistics for (default: all)."""
    if text is None:
        return list(METRIC_NAMES)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in METRIC_NAMES]
    if bad or not names:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, bad)) or 'none given'} "
                         f"(choose from {', '.join(METRIC_NAMES)})")
    return names


def _rate(value: Any) -> float | str:
    return "inf" if value in ("inf", None) or (isinstance(value, float) and math.isinf(value)) else value


def vllm_result(
    run: Mapping[str, Any],
    *,
    date: str,
    label: str | None = None,
    metadata: Mapping[str, str] | None = None,
    percentile_metrics: Sequence[str] = METRIC_NAMES,
    percentiles: Sequence[float] = (),
    figures: Mapping[str, Any] | None = None,
    detailed: Mapping[str, list] | None = None,
    save_detailed: bool = False,
    goodput: bool = False,
) -> dict[str, Any]:
    """The `vllm bench serve`-shaped dict of one finished run.

    `date` is vLLM's `%Y%m%d-%H%M%S`; `label` defaults to the backend, as in
    vLLM. `figures` are the run's `vllm_figures` (per-request lists, goodput,
    peaks); `detailed` its `detailed_lists` (`errors`, always written, and
    omni's own lists, kept with `save_detailed` like vLLM's). `goodput`:
    whether --goodput was given (vLLM writes `request_goodput: null` without).
    """
    figures = figures or {}
    duration = run.get("duration") or 0.0
    rounds = run.get("rounds") or 1
    doc: dict[str, Any] = {
        "date": date,
        "endpoint_type": BACKEND,
        "backend": BACKEND,
        "label": label or BACKEND,
        "model_id": run.get("model"),
        "tokenizer_id": run.get("model"),  # the talker tokenizes with its own model's tokenizer
        "num_prompts": (run.get("num_prompts") or 0) * rounds,  # as vLLM: == completed + failed
    }
    doc.update(metadata or {})
    doc.update({"request_rate": _rate(run.get("request_rate")), "burstiness": run.get("burstiness"),
                "max_concurrency": run.get("max_concurrency")})
    for key in ("ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"):
        if run.get(key) is not None:
            doc[key] = run[key]
    # vLLM-Omni fails a request without audio: completed counts those with audio (omni's file: num_empty_audio)
    completed = figures.get("completed", run.get("completed"))
    failed = figures.get("failed", run.get("failed"))
    throughput = run.get("request_throughput")
    if "completed" in figures:
        throughput = figures["completed"] / duration if duration > 0 else 0.0
    doc.update(
        {
            "duration": duration,
            "completed": completed,
            "failed": failed,
            "total_input_tokens": 0,
            "total_output_tokens": 0,
            "request_throughput": throughput,
            "request_goodput": figures.get("request_goodput") if goodput else None,
            "output_throughput": 0.0,
            "total_token_throughput": 0.0,
            "total_audio_duration_s": run.get("total_audio_duration_s"),
            "total_audio_frames": figures.get("total_audio_frames", 0),
            "audio_throughput": run.get("audio_throughput"),
        }
    )
    if save_detailed:
        doc.update({k: figures[k] for k in VLLM_DETAILED_KEYS if k in figures})
    doc.update({k: figures[k] for k in ("latencies", "queue_times") if k in figures})
    if "errors" in figures:
        doc["errors"] = list(figures["errors"])
    elif detailed is not None:
        doc["errors"] = ["" if e is None else e for e in detailed.get("errors", [])]
    doc.update({"max_output_tokens_per_s": figures.get("max_output_tokens_per_s", 0.0),
                "max_concurrent_requests": figures.get("max_concurrent_requests", 0), "rtfx": 0.0})
    doc.update(_distributions(run, percentile_metrics, percentiles))
    doc.update(_omni_keys(run, duration, detailed if save_detailed else None))
    return doc


def _distributions(run: Mapping[str, Any], metrics: Sequence[str], percentiles: Sequence[float]) -> dict[str, Any]:
    """vLLM's mean/median/std/pNN keys and sample count of each chosen metric, in vLLM's order."""
    out: dict[str, Any] = {}
    for stem, suffix, _ in DISTRIBUTIONS:
        if stem not in metrics:
            continue
        for stat in ["mean", "median", "std"] + [percentile_key(p) for p in percentiles]:
            key = f"{stat}_{stem}{suffix}"
            value = run.get(key)
            out[key] = 0.0 if value is None else value  # vLLM: np.mean(x or 0) of no samples is 0.0
        out[f"num_{stem}_samples"] = run.get(f"num_{stem}_samples", 0)
    return out


def _omni_keys(run: Mapping[str, Any], duration: float, detailed: Mapping[str, list] | None) -> dict[str, Any]:
    """What follows vLLM's keys: continuity (vLLM-Omni's and sglang-omni's names), omni's talker figures,
    the Seed-TTS quality keys, omni's extras, per-stage figures, the detailed lists (`detailed`: only with
    --save-detailed) and the notes on keys."""
    from omnicli.benchmark.continuity import KEYS as CONTINUITY_KEYS

    talker_out = run.get("total_output_tokens", 0)
    out: dict[str, Any] = {k: run[k] for k in CONTINUITY_KEYS if k in run}
    out.update(
        {
            "prompts_per_round": run.get("num_prompts"),
            "talker_prompt_tokens": run.get("total_input_tokens", 0),
            "talker_output_tokens": talker_out,
            "talker_output_throughput": talker_out / duration if duration > 0 else 0.0,
        }
    )
    out.update(seed_tts_quality(run.get("eval")))
    out.update({k: run[k] for k in EXTRA_KEYS if k in run})
    stage_figures = {k: run[k] for k in STAGE_KEYS if k in run}
    out.update(stage_figures)
    if detailed is not None:
        out.update({k: detailed[k] for k in DETAILED_KEYS if k in detailed})
    out["key_notes"] = dict(KEY_NOTES)
    if stage_figures:
        out["key_notes"][STAGE_NOTE[0]] = STAGE_NOTE[1]
    return out


def seed_tts_quality(figures: Mapping[str, Any] | None) -> dict[str, Any]:
    """vLLM-Omni's Seed-TTS quality keys from `omni bench --eval`'s figures, so its plot_results.py fills
    those columns: the content error a fraction (omni eval's percent / 100), SIM, and UTMOS only where omni
    eval's MOS backend was UTMOS (DNSMOS keeps a key of its own); {} without figures."""
    if not figures:
        return {}
    out: dict[str, Any] = {}
    if figures.get("seed_wer_mean") is not None:
        out["seed_tts_content_error_mean"] = figures["seed_wer_mean"] / 100.0
        if figures.get("median_wer") is not None:
            out["seed_tts_content_error_median"] = figures["median_wer"] / 100.0
        out["seed_tts_content_evaluated"] = figures.get("num_scored") or 0
    if figures.get("sim_mean") is not None:
        out.update(seed_tts_sim_mean=figures["sim_mean"], seed_tts_sim_median=figures.get("sim_median"),
                   seed_tts_sim_evaluated=figures.get("num_sim_scored") or 0)
    if figures.get("utmos_mean") is not None:
        out.update(seed_tts_utmos_mean=figures["utmos_mean"], seed_tts_utmos_median=figures.get("utmos_median"),
                   seed_tts_utmos_evaluated=figures.get("num_mos_scored") or 0)
    if figures.get("dnsmos_ovrl_mean") is not None:
        out.update(seed_tts_dnsmos_ovrl_mean=figures["dnsmos_ovrl_mean"],
                   seed_tts_dnsmos_ovrl_median=figures.get("dnsmos_ovrl_median"))
    return out


def result_filename(doc: Mapping[str, Any], *, profile_label: str | None = None) -> str:
    """vLLM's default name, `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`
    (`{label}-ramp-up-{strategy}-{start}qps-{end}qps...` for a ramp-up), with
    `-{profile}` after the label when several profiles ran (A/B)."""
    model = str(doc.get("model_id") or "model").split("/")[-1]
    profile = f"-{profile_label}" if profile_label else ""
    name = f"{doc['label']}{profile}-{_shape_part(doc)}-{model}-{doc['date']}.json"
    return name.replace("/", "_").replace("#", "_")


def _shape_part(doc: Mapping[str, Any]) -> str:
    concurrency = f"-concurrency{doc['max_concurrency']}" if doc.get("max_concurrency") is not None else ""
    if doc.get("ramp_up_strategy"):
        return (f"ramp-up-{doc['ramp_up_strategy']}-{doc['ramp_up_start_rps']}qps-{doc['ramp_up_end_rps']}qps"
                f"{concurrency}")
    rate = doc["request_rate"]
    return f"{'inf' if rate == 'inf' else str(float(rate))}qps{concurrency}"


FILENAME_FIELDS = ("concurrency", "rate", "profile", "label", "model", "date")


def check_filename_template(template: str) -> bool:
    """True when `--result-filename` names fields (`{concurrency}`, `{rate}`, ...); ValueError on an
    unknown field or a bad brace."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"{template!r}: {exc}") from None
    bad = [f for f in fields if f not in FILENAME_FIELDS]
    if bad:
        raise ValueError(f"{template!r}: unknown field(s) {', '.join('{' + f + '}' for f in bad)} "
                         f"(use {', '.join('{' + f + '}' for f in FILENAME_FIELDS)})")
    return bool(fields)


def run_filename(template: str, doc: Mapping[str, Any], *, profile_label: str, one_file_per_run: bool) -> str:
    """`--result-filename` for one run: its fields filled in (`{concurrency}` is `none` without a
    cap, `{rate}` `inf` or the number); with `one_file_per_run` and no field, the run's load
    shape (and profile) is added before the suffix (`r.json` -> `r-infqps-concurrency8.json`)."""
    concurrency = doc.get("max_concurrency")
    rate = doc["request_rate"]
    values = {"concurrency": "none" if concurrency is None else concurrency,
              "rate": "inf" if rate == "inf" else f"{float(rate):g}",
              "profile": profile_label, "label": doc["label"],
              "model": str(doc.get("model_id") or "model").split("/")[-1],
              "date": doc["date"]}
    if check_filename_template(template):
        # A value is one name, never a path: `/` in a label or a profile's file name is replaced, as in the
        # default name (the template's own `/` still names a subfolder, as the user wrote it).
        name = template.format_map({k: _one_name(v) if isinstance(v, str) else v for k, v in values.items()})
    elif one_file_per_run:
        path = Path(template)
        profile = f"-{_one_name(profile_label)}" if profile_label else ""
        name = f"{path.stem}{profile}-{_shape_part(doc)}{path.suffix or '.json'}"
    else:
        name = template
    return name.replace("#", "_")


def _one_name(value: object) -> str:
    name = str(value).replace("/", "_").replace("\\", "_")
    return "_" * len(name) if name in (".", "..") else name


def write_result(path: str | Path, doc: Mapping[str, Any], *, append: bool = False) -> Path:
    """Writes one result object; with `append`, after whatever the file holds, separated by a
    newline, byte for byte as vLLM's `--append-result` writes (no newline after the last one).
    Atomic either way. ResultFileError when an existing file is not one to append to."""
    path = Path(path)
    before = appendable_text(path) if append else ""
    return write_text_atomic(path, before + ("\n" if before else "") + json.dumps(doc))


def appendable_text(path: str | Path) -> str:
    """What the `--append-result` target `path` holds ("" when it does not exist yet). ResultFileError
    (exit 2) naming it when it is not a file of result objects: not a regular file (a FIFO, a device,
    a folder), over the size bound, not UTF-8, not JSON objects. Checked before the run and again
    when written."""
    from omnicli.benchmark.result_models import ResultFileError
    from omnicli.runtime.files import UserFileError, read_user_text

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return ""
    try:
        text = read_user_text(path)
    except UserFileError as exc:
        raise ResultFileError(f"--append-result {exc.path}: {exc.reason}") from None
    try:
        objects = _parse_results(text)
    except ValueError as exc:
        raise ResultFileError(f"--append-result {path}: not a result file to append to ({exc})") from None
    if (bad := next((o for o in objects if not isinstance(o, dict)), None)) is not None:
        raise ResultFileError(f"--append-result {path}: not a result file to append to "
                              f"(holds {type(bad).__name__} where result objects go)")
    return text


def read_results(path: str | Path) -> list[dict]:
    """Every object in a result file (one, or several appended): how tools read them back."""
    from omnicli.runtime.files import read_user_text

    return _parse_results(read_user_text(path))


def _parse_results(text: str) -> list[Any]:
    """The JSON values of `text`, one after the other (whitespace between); ValueError (a
    JSONDecodeError, or too deeply nested) at the first that does not parse."""
    decoder, i = json.JSONDecoder(), 0
    out: list[Any] = []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = decoder.raw_decode(text, i)
        except RecursionError:
            raise ValueError(f"nested too deeply at char {i}") from None
        out.append(obj)
