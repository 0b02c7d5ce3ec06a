"""The `omni bench` result files as typed models (their JSON Schemas: `omni schema bench` / `bench-run`).

`BenchDocument` is the summary file: built from `BenchRun`s, written and loaded back. Every run
carries the declared keys whatever happened (statistics without samples are null); the `pNN_`
statistics of `--metric-percentiles` come on top of them, and the optional fields only when their
option ran (--save-detailed lists, --eval, --ray, --interleave). `VllmRunResult` is one
`--save-result` file, `vllm bench serve`'s shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from omnicli.benchmark.metrics import DISTRIBUTIONS, percentile_key
from omnicli.errors import UsageError
from omnicli.runtime.files import UserFileError, read_user_text


class BenchFailure(BaseModel):
    utt: str
    request_id: str
    round: int
    error: str | None
    engine: int | None = Field(None, description="With --ray: the engine (0-based) that ran the request.")


class BenchEvalFigures(BaseModel):
    """`omni bench --eval`: the headline figures of `omni eval` on one pass's audio (all in `summary_file`)."""

    model_config = ConfigDict(extra="forbid")

    metrics: list[Literal["wer", "sim", "mos"]]
    error: str | None = Field(None, description="Why scoring this pass failed (then no figures).")
    summary_file: str | None = Field(None, description="The pass's eval_summary.json, with every figure.")
    seed_wer_mean: float | None = Field(None, description="Percent, as omni eval.")
    median_wer: float | None = Field(None, description="Percent, as omni eval.")
    corpus_wer: float | None = None
    num_scored: int | None = None
    asr_s_per_utt: float | None = None
    sim_mean: float | None = None
    sim_median: float | None = None
    sim_share_below_threshold: float | None = None
    sim_backend: str | None = None
    sim_note: str | None = None
    num_sim_scored: int | None = None
    sim_cpu_s_per_utt: float | None = None
    dnsmos_ovrl_mean: float | None = None
    dnsmos_ovrl_median: float | None = None
    dnsmos_sig_mean: float | None = None
    dnsmos_bak_mean: float | None = None
    dnsmos_p808_mean: float | None = None
    utmos_mean: float | None = None
    utmos_median: float | None = None
    mos_share_below_threshold: float | None = None
    mos_backends: list[str] | None = None
    num_mos_scored: int | None = None
    mos_cpu_s_per_utt: float | None = None
    num_utts: int | None = None
    num_missing: int | None = None
    num_failed: int | None = None
    num_sim_failed: int | None = None
    num_mos_failed: int | None = None
    wall_s: float | None = None


# The eval_summary.json keys copied into a pass's `eval` entry.
EVAL_RESULT_KEYS = tuple(k for k in BenchEvalFigures.model_fields if k not in ("metrics", "error", "summary_file"))


class BenchEngineRun(BaseModel):
    """With --ray: one engine's figures for a pass (the same keys as a run's, for this engine alone)."""

    model_config = ConfigDict(extra="allow")  # the rest of a run's keys (checked below), as in a run

    engine: int = Field(description="0-based engine index.")
    node: str | None = Field(description="The Ray node id the engine ran on.")
    engine_error: str | None = Field(description="Why this engine failed during the pass (then no figures).")
    device: str | None = None
    machine: dict[str, Any] | None = Field(
        None, description="The engine's node, as a run's `machine` (the run's is the first engine's).")
    duration: float | None = Field(
        None, description="This engine's own first submission to last completion, summed over rounds.")
    completed: int | None = None
    failed: int | None = None
    request_throughput: float | None = None
    audio_throughput: float | None = None
    talker_tokens_per_s: float | None = None
    total_audio_duration_s: float | None = None
    failures: list[BenchFailure] | None = None

    @model_validator(mode="after")
    def _only_run_keys(self) -> BenchEngineRun:
        for key in self.model_extra or {}:  # the other keys of a run: BenchRun's fields and pNN_ statistics
            if key not in BenchRun.model_fields and not PERCENTILE_KEY.fullmatch(key):
                raise ValueError(f"{key}: not a key of a run")
        return self


class BenchRayFacts(BaseModel):
    """With --ray: where the engines ran."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(description="--ray-address, or null for a local cluster this run started.")
    engines: int
    gpus_per_engine: float
    cpus_per_engine: float
    nodes: int = Field(description="Distinct Ray nodes the engines ran on.")


class BenchRoundFigures(BaseModel):
    """With --interleave: one measured round's own figures (the run's figures pool its rounds)."""

    model_config = ConfigDict(extra="forbid")

    round: int = Field(description="0-based round of the pass.")
    load_avg: float | None = Field(description="The machine's 1-minute load average around the round.")
    audio_throughput: float | None
    request_throughput: float | None
    mean_audio_ttfp_ms: float | None
    p99_audio_ttfp_ms: float | None
    mean_e2el_ms: float | None
    mean_audio_rtf: float | None


_STAT_STEMS = "|".join(f"{stem}{suffix}" for stem, suffix, _ in DISTRIBUTIONS)
_STAT_KEY = re.compile(r"(mean|median|std|p\d+(\.\d+)?)_(" + _STAT_STEMS + ")")
# The `--metric-percentiles` statistics (`p99_audio_ttfp_ms`, `p99.9_e2el_ms`, ...): one per percentile asked for.
PERCENTILE_KEY = re.compile(r"p(\d+(?:\.\d+)?)_(" + _STAT_STEMS + ")")


class BenchRun(BaseModel):
    """One measured pass: a profile under one load shape, its rounds pooled.

    Every key of docs/metrics.md is a field; the `pNN_` statistics of `--metric-percentiles` (any
    percentiles, so not fields) are the only other keys a run may hold, read with `figure(key)` or
    `percentile(p, stem)`. `to_dict()` is the run as the result file holds it.
    """

    model_config = ConfigDict(extra="allow", json_schema_extra={  # extra: the pNN_ statistics, and nothing else
        "patternProperties": {f"^{PERCENTILE_KEY.pattern}$": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
        "additionalProperties": False})

    omni_version: str
    started_at: str
    label: str = Field(description="`profile/shape`, e.g. default/c8.")
    profile_label: str
    profile_name: str | None
    profile: dict[str, Any] | None = Field(description="The resolved profile.")
    profile_digest: str | None
    model: str
    device: str
    sample_rate: int
    machine: dict[str, Any]
    max_concurrency: int | None
    request_rate: float | Literal["inf"]
    burstiness: float
    seed: int
    num_prompts: int
    rounds: int
    warmup_requests: int
    warmup_failed: int
    ramp_up_strategy: Literal["linear", "exponential"] | None = Field(
        None, description="--ramp-up-strategy, when given.")
    ramp_up_start_rps: float | None = None
    ramp_up_end_rps: float | None = None
    duration: float = Field(description="Seconds from the first submission to the last completion, summed over rounds.")
    round_durations: list[float]
    completed: int
    failed: int
    num_nonempty_audio: int
    num_empty_audio: int
    num_hit_cap: int
    num_ref_hot: int
    num_ref_cold: int
    total_audio_duration_s: float
    total_input_tokens: int = Field(description="Talker prompt tokens of the completed requests (vLLM's input tokens).")
    total_output_tokens: int = Field(
        description="Talker tokens the completed requests generated (vLLM's output tokens).")
    request_throughput: float
    audio_throughput: float = Field(description="Audio seconds per wall second.")
    # Each distribution of metrics.DISTRIBUTIONS: its sample count and statistics (null without samples).
    # Audio ones are over the successful requests with audio; ttft/tpot/itl are the talker's tokens.
    num_audio_ttfp_samples: int
    mean_audio_ttfp_ms: float | None
    median_audio_ttfp_ms: float | None
    std_audio_ttfp_ms: float | None
    num_e2el_samples: int
    mean_e2el_ms: float | None
    median_e2el_ms: float | None
    std_e2el_ms: float | None
    num_audio_rtf_samples: int
    mean_audio_rtf: float | None
    median_audio_rtf: float | None
    std_audio_rtf: float | None
    num_audio_duration_samples: int
    mean_audio_duration_s: float | None
    median_audio_duration_s: float | None
    std_audio_duration_s: float | None
    num_audio_underrun_samples: int
    mean_audio_underrun_s: float | None
    median_audio_underrun_s: float | None
    std_audio_underrun_s: float | None
    num_ttft_samples: int
    mean_ttft_ms: float | None
    median_ttft_ms: float | None
    std_ttft_ms: float | None
    num_tpot_samples: int
    mean_tpot_ms: float | None
    median_tpot_ms: float | None
    std_tpot_ms: float | None
    num_itl_samples: int
    mean_itl_ms: float | None
    median_itl_ms: float | None
    std_itl_ms: float | None
    # streaming continuity (omnicli/benchmark/continuity.py): vLLM-Omni's OK rate, sglang-omni's C50/C100/C200
    audio_continuity_threshold_s: float | None = Field(
        None, description="vLLM-Omni's threshold (VLLM_OMNI_BENCH_AUDIO_CONTINUITY_THRESHOLD_S, default 0.1 s).")
    audio_continuity_ok_rate: float | None = Field(
        None, description="Share of successful requests with audio whose worst underrun <= the threshold.")
    audio_continuity_c50_rate: float | None = Field(None, description="The same share at 50 ms (sglang-omni's C50).")
    audio_continuity_c100_rate: float | None = Field(None, description="The same share at 100 ms (C100).")
    audio_continuity_c200_rate: float | None = Field(None, description="The same share at 200 ms (C200).")
    p95_inter_chunk_gap_ms: float | None = Field(
        None, description="95th percentile of the gaps between consecutive audio chunks, pooled over requests.")


    # vLLM-Omni's engine: per-stage figures of this pass (omnicli/benchmark/stage_metrics.py)
    stage_talker_tokens_mean: float | None = None
    stage_talker_time_ms_mean: float | None = Field(
        None, description="Mean wall time a request spent in the talker stage (waiting included).")
    stage_talker_first_output_ms_mean: float | None = None
    stage_codec_frames_mean: float | None = None
    stage_codec_time_ms_mean: float | None = Field(
        None, description="Mean wall time a request spent in the codec stage, waiting for the talker included.")
    stage_codec_first_output_ms_mean: float | None = None
    stage_talker_busy_s: float | None = Field(
        None, description="Wall seconds the talker stage held at least one of the pass's requests.")
    stage_talker_cpu_s: float | None = Field(
        None, description="CPU seconds of the talker stage's processes during the pass (at most cores x wall).")
    stage_talker_cpu_s_per_audio_s: float | None = None
    stage_codec_busy_s: float | None = Field(
        None, description="Wall seconds the codec stage held at least one of the pass's requests.")
    stage_codec_cpu_s: float | None = Field(
        None, description="CPU seconds of the codec stage's processes during the pass: its compute, not its waits.")
    stage_codec_cpu_s_per_audio_s: float | None = None
    talker_tokens: int
    talker_tokens_per_s: float
    codec_steps: int
    codec_frames: int
    mean_codec_batch_size: float
    coalescing_waits: int
    coalescing_wait_ms: float
    codec_ring_headroom: bool | None
    engine_stats: dict[str, Any]
    failures: list[BenchFailure]
    num_engines: int | None = Field(
        None, description="With --ray: engines that ran this pass at the same time, each with the whole load shape; "
        "the figures above are their total (throughputs summed, latency samples pooled).")
    per_engine: list[BenchEngineRun] | None = Field(None, description="With --ray: each engine's own figures.")
    interleaved: bool | None = Field(
        None, description="With --interleave: true (its rounds alternated with the other profiles').")
    engine_restarts: bool | None = Field(
        None, description="With --interleave: true when the engines could not all run at once and each round had "
        "a fresh engine.")
    per_round: list[BenchRoundFigures] | None = Field(None, description="With --interleave: each round's figures.")
    eval: BenchEvalFigures | None = Field(
        None, description="With --eval: the figures of omni eval on this pass's audio.")
    # --save-detailed: per-request lists in submission order, rounds concatenated (docs/bench.md)
    utts: list[str] | None = None
    request_rounds: list[int] | None = None
    start_times: list[float] | None = None
    audio_ttfps: list[float | None] | None = None
    e2els: list[float | None] | None = None
    audio_durations: list[float] | None = None
    audio_rtfs: list[float | None] | None = None
    audio_underruns: list[float | None] | None = None
    ref_caches: list[str | None] | None = None
    finish_reasons: list[str | None] | None = None
    errors: list[str] | None = None
    request_engines: list[int] | None = Field(None, description="--save-detailed with --ray: each request's engine.")

    @model_validator(mode="after")
    def _only_percentile_statistics(self) -> BenchRun:
        for key, value in (self.model_extra or {}).items():
            if not PERCENTILE_KEY.fullmatch(key):
                raise ValueError(f"{key}: not a result key (nor a pNN_ statistic of a distribution)")
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise ValueError(f"{key}: a statistic is a number or null (got {value!r})")
        return self

    @model_serializer(mode="wrap")
    def _file_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The file's key order: each distribution's `pNN_` statistics right after its `std_`."""
        data = handler(self)
        extra = [k for k in data if k in (self.model_extra or {})]
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in extra:
                continue
            out[key] = value
            if key.startswith("std_"):
                out.update((k, data[k]) for k in extra if k.endswith(key[3:]) and PERCENTILE_KEY.fullmatch(k))
        out.update((k, data[k]) for k in extra if k not in out)
        return out

    def figure(self, key: str) -> Any:
        """The value of a result key (a field or a `pNN_` statistic); None when the run has none."""
        if key in type(self).model_fields:
            return getattr(self, key)
        return (self.model_extra or {}).get(key)

    def percentile(self, p: float, stem: str) -> float | None:
        """The `p`th percentile of a distribution (`audio_ttfp`, `e2el`, ...), in its file unit."""
        return self.figure(f"{percentile_key(p)}_{stem}{_SUFFIX[stem]}")

    @property
    def percentiles(self) -> list[float]:
        """The `--metric-percentiles` the run was reported with (read from its `pNN_` keys)."""
        out: list[float] = []
        for key in self.model_extra or {}:
            match = PERCENTILE_KEY.fullmatch(key)
            if match and float(match.group(1)) not in out:
                out.append(float(match.group(1)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The run as the result file holds it (keys a run did not have stay out)."""
        return self.model_dump(exclude_unset=True)


_SUFFIX = {stem: suffix for stem, suffix, _ in DISTRIBUTIONS}


class BenchRoundRatio(BaseModel):
    """With --interleave: one metric of b against a over their rounds (omnicli/benchmark/compare.py)."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    a_rounds: int = Field(description="a's rounds with a figure for this metric.")
    b_rounds: int
    a_median: float | None
    a_min: float | None
    a_max: float | None
    b_median: float | None
    b_min: float | None
    b_max: float | None
    ratio: float | None = Field(description="median(b) / median(a).")
    low: float | None = Field(description="The bootstrap interval of the ratio; null with fewer than 3 rounds each.")
    high: float | None
    confidence: float | None
    measured: bool | None = Field(
        description="The interval excludes 1.0 (a difference was measured); null without an interval.")
    summary: str = Field(
        description="As printed: the ratio and interval, 'no difference measured (...)' or 'no interval (...)'.")


class BenchComparison(BaseModel):
    max_concurrency: int | None
    request_rate: float | Literal["inf"]
    a: str
    b: str
    ratios: dict[str, float | None] = Field(description="b's metric divided by a's.")
    interleaved: list[BenchRoundRatio] | None = Field(
        None, description="With --interleave: per metric, the ratio of the rounds' medians and its interval.")


class BenchDocument(BaseModel):
    """The result file of one `omni bench` invocation: built by `report.build_document`, written with
    `write(path)`, read back with `BenchDocument.load(path)` (also files written before `schema_version`)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = Field(1, description="1; raised on a change that breaks readers.")
    omni_version: str
    started_at: str
    interrupted: bool
    engine_error: str | None
    unfinished: str | None = Field(description="The pass an interruption or engine failure dropped.")
    runs: list[BenchRun]
    comparisons: list[BenchComparison]
    ray: BenchRayFacts | None = Field(None, description="With --ray: the cluster and the engines' resources.")

    @model_serializer(mode="wrap")
    def _versioned(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {"schema_version": self.schema_version, **handler(self)}  # also when read from an older file

    @property
    def percentiles(self) -> list[float]:
        """The `--metric-percentiles` of the runs (the default ones for a document without runs)."""
        from omnicli.benchmark.metrics import DEFAULT_PERCENTILES

        return self.runs[0].percentiles if self.runs else list(DEFAULT_PERCENTILES)

    def to_dict(self) -> dict[str, Any]:
        """The document as the file holds it (keys a run did not have stay out)."""
        return self.model_dump(exclude_unset=True)

    def write(self, path: str | Path) -> Path:
        """Writes the file atomically (a reader never sees half of it)."""
        from omnicli.atomic import write_json_atomic

        return write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> BenchDocument:
        """Reads a result file back; ResultFileError (a usage error) naming the file and why when it cannot."""
        path = Path(path)
        try:  # a regular file within the size bound: a FIFO or a link to /dev/zero is refused, not read forever
            data = json.loads(read_user_text(path))
        except UserFileError as exc:
            raise ResultFileError(f"{path}: cannot read it: {exc.reason}") from None
        except json.JSONDecodeError as exc:
            raise ResultFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise ResultFileError(f"{path}: not an omni bench result file: JSON nested too deeply") from None
        if not isinstance(data, dict) or "runs" not in data:
            raise ResultFileError(f"{path}: not an omni bench result file (no `runs`; a --save-result file is "
                                  "vLLM's shape: re-render the omni-bench-*.json summary beside it)")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ResultFileError(f"{path}: not an omni bench result file: {where}: {first['msg']} "
                                  f"({exc.error_count()} problem(s))") from None


class ResultFileError(UsageError):
    """A bench result file that cannot be read back."""


class VllmRunResult(BaseModel):
    """One `omni bench --save-result` file: `vllm bench serve`'s keys (docs/bench.md), then omni's.

    Besides the fields below a file holds the `mean_/median_/std_/pNN_` statistics of the
    --percentile-metrics (numbers, 0.0 without samples, as vLLM) and each --metadata pair
    (a string): any other key is refused.
    """

    model_config = ConfigDict(extra="allow")  # statistics and --metadata keys, checked below

    date: str = Field(description="%Y%m%d-%H%M%S of the invocation, as vLLM.")
    endpoint_type: str
    backend: str
    label: str
    model_id: str | None
    tokenizer_id: str | None
    num_prompts: int = Field(description="Requests measured (prompts per round x rounds): completed + failed.")
    request_rate: float | Literal["inf"]
    burstiness: float
    max_concurrency: int | None
    ramp_up_strategy: Literal["linear", "exponential"] | None = None
    ramp_up_start_rps: float | None = None
    ramp_up_end_rps: float | None = None
    duration: float
    completed: int
    failed: int
    total_input_tokens: int = Field(description="0: no text tokens are counted (see key_notes).")
    total_output_tokens: int = Field(description="0, as vLLM-Omni's speech endpoint reports it.")
    request_throughput: float
    request_goodput: float | None = Field(
        description="With --goodput: requests meeting every SLO per second; else null, as vLLM.")
    output_throughput: float
    total_token_throughput: float
    total_audio_duration_s: float
    total_audio_frames: int = Field(description="PCM frames (samples per channel) of the completed requests.")
    audio_throughput: float
    input_lens: list[int] | None = Field(None, description="--save-detailed: talker prompt tokens per request.")
    output_lens: list[int] | None = Field(None, description="--save-detailed: talker tokens per request (0 if failed).")
    ttfts: list[float] | None = Field(None, description="--save-detailed: seconds (0.0 if failed).")
    itls: list[list[float]] | None = Field(None, description="--save-detailed: seconds between talker outputs.")
    start_times: list[float] | None = Field(
        None, description="--save-detailed: seconds from the round's first submission.")
    latencies: list[float] = Field(description="e2el seconds per request (0.0 if failed), as vLLM.")
    queue_times: list[float] = Field(description="Seconds each request waited for a concurrency slot.")
    errors: list[str]
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    rtfx: float
    prompts_per_round: int
    talker_prompt_tokens: int
    talker_output_tokens: int
    talker_output_throughput: float = Field(description="Talker tokens per wall second.")
    num_audio_ttfp_samples: int | None = None
    num_e2el_samples: int | None = None
    num_audio_rtf_samples: int | None = None
    num_audio_duration_samples: int | None = None
    num_audio_underrun_samples: int | None = None
    num_ttft_samples: int | None = None
    num_tpot_samples: int | None = None
    num_itl_samples: int | None = None
    omni_version: str
    started_at: str
    profile_label: str
    profile_name: str | None
    profile_digest: str | None
    device: str
    sample_rate: int
    seed: int
    rounds: int
    warmup_requests: int
    warmup_failed: int
    round_durations: list[float]
    num_nonempty_audio: int
    num_empty_audio: int
    num_hit_cap: int
    num_ref_hot: int
    num_ref_cold: int
    talker_tokens_per_s: float
    codec_steps: int
    codec_frames: int
    mean_codec_batch_size: float
    coalescing_waits: int
    coalescing_wait_ms: float
    codec_ring_headroom: bool | None
    machine: dict[str, Any]
    failures: list[BenchFailure]
    eval: BenchEvalFigures | None = None
    seed_tts_content_error_mean: float | None = Field(
        None, description="With --eval wer: vLLM-Omni's WER key, a fraction.")
    seed_tts_content_evaluated: int | None = Field(None, description="With --eval wer: utterances scored.")
    seed_tts_content_error_median: float | None = Field(None, description="With --eval wer: median WER, a fraction.")
    seed_tts_sim_mean: float | None = Field(None, description="With --eval sim: omni eval's speaker similarity.")
    seed_tts_sim_median: float | None = None
    seed_tts_sim_evaluated: int | None = None
    seed_tts_utmos_mean: float | None = Field(None, description="With --eval mos and the utmos backend.")
    seed_tts_utmos_median: float | None = None
    seed_tts_utmos_evaluated: int | None = None
    seed_tts_dnsmos_ovrl_mean: float | None = Field(
        None, description="With --eval mos and the dnsmos backend: DNSMOS, never under a UTMOS key.")
    seed_tts_dnsmos_ovrl_median: float | None = None
    audio_continuity_threshold_s: float | None = None
    audio_continuity_ok_rate: float | None = None
    audio_continuity_c50_rate: float | None = None
    audio_continuity_c100_rate: float | None = None
    audio_continuity_c200_rate: float | None = None
    p95_inter_chunk_gap_ms: float | None = None
    # vLLM-Omni's engine: the run's per-stage figures (vllm_format.STAGE_KEYS; key_notes says what they hold)
    stage_talker_tokens_mean: float | None = None
    stage_talker_time_ms_mean: float | None = None
    stage_talker_first_output_ms_mean: float | None = None
    stage_codec_frames_mean: float | None = None
    stage_codec_time_ms_mean: float | None = None
    stage_codec_first_output_ms_mean: float | None = None
    stage_talker_busy_s: float | None = None
    stage_talker_cpu_s: float | None = None
    stage_talker_cpu_s_per_audio_s: float | None = None
    stage_codec_busy_s: float | None = None
    stage_codec_cpu_s: float | None = None
    stage_codec_cpu_s_per_audio_s: float | None = None
    utts: list[str] | None = None
    request_rounds: list[int] | None = None
    audio_ttfps: list[float | None] | None = None
    e2els: list[float | None] | None = None
    audio_durations: list[float] | None = None
    audio_rtfs: list[float | None] | None = None
    audio_underruns: list[float | None] | None = None
    ref_caches: list[str] | None = None
    finish_reasons: list[str | None] | None = None
    key_notes: dict[str, str] = Field(description="What a key holds where that differs from vLLM's meaning.")

    @model_validator(mode="after")
    def _only_statistics_and_metadata(self) -> VllmRunResult:
        for key, value in (self.model_extra or {}).items():
            if _STAT_KEY.fullmatch(key):
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    raise ValueError(f"{key}: a statistic must be a number (got {value!r})")
            elif not isinstance(value, str):
                raise ValueError(f"{key}: not a result key, and not a --metadata string (got {value!r})")
        return self


def metadata_problem(key: str, value: str) -> str | None:
    """Why `--metadata KEY=VALUE` cannot go into a `VllmRunResult` file, or None. A new key is any
    string; a key of the file's own (`num_prompts`, a statistic) must still read as its type, as
    the file is checked when written (checked before the run, so the run's figures are not lost)."""
    from pydantic import TypeAdapter

    if _STAT_KEY.fullmatch(key):
        return f"{key} is one of the result file's statistics (a number, written by the run): choose another key"
    field = VllmRunResult.model_fields.get(key)
    if field is None or field.annotation is None:
        return None
    try:
        TypeAdapter(field.annotation).validate_python(value)  # lax, as the file's check: "100" reads as an int
    except ValidationError as exc:
        return (f"{key} is one of the result file's own keys, and {value!r} does not read as one "
                f"({exc.errors()[0]['msg']}): give a valid value or another key")
    return None
