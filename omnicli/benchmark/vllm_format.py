"""Per-run result files shaped like `vllm bench serve --save-result` writes them.

One flat JSON object per measured run (one load shape of one profile): vLLM's
top-level keys where the meaning is the same (`date`, `backend`, `label`,
`model_id`, `tokenizer_id`, `num_prompts`, `request_rate`, `burstiness`,
`max_concurrency`, `duration`, `completed`, `failed`, `total_input_tokens`,
`total_output_tokens`, `request_throughput`, `output_throughput`,
`total_token_throughput`, `errors`, and `mean_/median_/std_/pNN_` per metric),
vLLM-Omni's audio keys (`audio_throughput`, `*_audio_ttfp_ms`,
`*_audio_rtf`, `*_audio_duration_s`), and omni's extras under their own names.
`--metadata KEY=VALUE` pairs become top-level keys, as in vLLM.

The input is a finished run as the summary document holds it (a flat dict,
see docs/metrics.md); nothing here measures anything.
"""

from __future__ import annotations

import json
import math
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
    "num_empty_audio", "num_hit_cap", "num_ref_hot", "num_ref_cold", "total_audio_duration_s",
    "talker_tokens_per_s", "codec_steps", "codec_frames", "mean_codec_batch_size", "coalescing_waits",
    "coalescing_wait_ms", "codec_ring_headroom", "machine", "failures",
    "eval",  # with `omni bench --eval`: omni eval's figures on the run's audio
)
# Per-request lists kept only with --save-detailed (vLLM drops its own without it).
DETAILED_KEYS = ("utts", "request_rounds", "start_times", "audio_ttfps", "e2els", "audio_durations", "audio_rtfs",
                 "audio_underruns", "ref_caches", "finish_reasons")


def parse_metadata(items: Iterable[str] | None) -> dict[str, str]:
    """`["version=0.3", "tp=1"]` -> {"version": "0.3", "tp": "1"}: vLLM splits at the first '='
    and strips both sides. Raises ValueError naming the bad item."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{item!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def parse_percentile_metrics(text: str | None) -> list[str]:
    """`"audio_ttfp,e2el"` -> the metric stems to report statistics for (default: all)."""
    if text is None:
        return list(METRIC_NAMES)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in METRIC_NAMES]
    if bad or not names:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, bad)) or 'none given'} (choose from {', '.join(METRIC_NAMES)})")
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
    detailed: Mapping[str, list] | None = None,
    save_detailed: bool = False,
) -> dict[str, Any]:
    """The `vllm bench serve`-shaped dict of one finished run.

    `date` is vLLM's `%Y%m%d-%H%M%S`; `label` defaults to the backend, as in
    vLLM. `detailed` (per-request lists, see `detailed_lists`) supplies
    `errors` ("" for a request that succeeded, as vLLM writes it); with
    `save_detailed` the other per-request lists are kept too.
    """
    duration = run.get("duration") or 0.0
    inp, out = run.get("total_input_tokens"), run.get("total_output_tokens", run.get("talker_tokens"))
    doc: dict[str, Any] = {
        "date": date,
        "endpoint_type": BACKEND,
        "backend": BACKEND,
        "label": label or BACKEND,
        "model_id": run.get("model"),
        "tokenizer_id": run.get("model"),  # the talker tokenizes with its own model's tokenizer
        "num_prompts": run.get("num_prompts"),
    }
    doc.update(metadata or {})
    doc.update(
        {
            "request_rate": _rate(run.get("request_rate")),
            "burstiness": run.get("burstiness"),
            "max_concurrency": run.get("max_concurrency"),
            "duration": duration,
            "completed": run.get("completed"),
            "failed": run.get("failed"),
            "total_input_tokens": inp,
            "total_output_tokens": out,
            "request_throughput": run.get("request_throughput"),
            "output_throughput": out / duration if out is not None and duration > 0 else 0.0,
            "total_token_throughput": ((inp or 0) + (out or 0)) / duration if duration > 0 else 0.0,
            "audio_throughput": run.get("audio_throughput"),
        }
    )
    for stem, suffix, _ in DISTRIBUTIONS:
        if stem not in percentile_metrics:
            continue
        for stat in ["mean", "median", "std"] + [percentile_key(p) for p in percentiles]:
            key = f"{stat}_{stem}{suffix}"
            doc[key] = run.get(key)
    for key in EXTRA_KEYS:
        if key in run:
            doc[key] = run[key]
    if detailed is not None:
        doc["errors"] = ["" if e is None else e for e in detailed.get("errors", [])]
        if save_detailed:
            for key in DETAILED_KEYS:
                if key in detailed:
                    doc[key] = detailed[key]
    return doc


def result_filename(doc: Mapping[str, Any], *, profile_label: str | None = None) -> str:
    """vLLM's default name, `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`,
    with `-{profile}` after the label when several profiles ran (A/B)."""
    rate = doc["request_rate"]
    rate_text = "inf" if rate == "inf" else str(float(rate))
    concurrency = f"-concurrency{doc['max_concurrency']}" if doc.get("max_concurrency") is not None else ""
    model = str(doc.get("model_id") or "model").split("/")[-1]
    profile = f"-{profile_label}" if profile_label else ""
    name = f"{doc['label']}{profile}-{rate_text}qps{concurrency}-{model}-{doc['date']}.json"
    return name.replace("/", "_").replace("#", "_")


def write_result(path: str | Path, doc: Mapping[str, Any], *, append: bool = False) -> Path:
    """Writes one result object; with `append`, after whatever the file holds,
    separated by a newline (vLLM's `--append-result` layout). Atomic either way."""
    path = Path(path)
    before = ""
    if append and path.exists():
        before = path.read_text(encoding="utf-8")
        if before and not before.endswith("\n"):
            before += "\n"
    return write_text_atomic(path, before + json.dumps(doc) + "\n")


def read_results(path: str | Path) -> list[dict]:
    """Every object in a result file (one, or several appended): how tools read them back."""
    decoder, text, out, i = json.JSONDecoder(), Path(path).read_text(encoding="utf-8"), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)
