"""Typed views of the rows `omni report` reads that the project's own models do not cover.

Eval rows, retention sidecars and bench runs come from files anyone may have
edited; each is validated here before the page uses it, so a wrong type (a
`reasons: 5`, a `wer: {}`, a `max_concurrency: [1, 2]`) is one skipped row with
a note, never a traceback. Unknown keys are kept (bench files grow vLLM's keys)
or ignored. Numbers that are not finite (JSON's NaN / Infinity, which Python's
json module reads) are replaced by None before validation and counted, so the
page shows them empty and says so: `JSON.parse` refuses bare NaN.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

__all__ = ["BenchRunView", "EvalRow", "SidecarMeta", "ValidationError", "drop_nonfinite", "first_error"]


def drop_nonfinite(value: Any, *, infinite_ok: tuple[str, ...] = ()) -> tuple[Any, int]:
    """`value` with every NaN / Infinity (at any depth) replaced by None, and how many were. A key in
    `infinite_ok` holding +Infinity gets "inf" instead (a bench run's uncapped `request_rate`), uncounted."""
    if isinstance(value, float):
        return (value, 0) if math.isfinite(value) else (None, 1)
    if isinstance(value, dict):
        count = 0
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if key in infinite_ok and item == math.inf:
                out[key] = "inf"
                continue
            out[key], n = drop_nonfinite(item, infinite_ok=infinite_ok)
            count += n
        return out, count
    if isinstance(value, list):
        count = 0
        items = []
        for item in value:
            clean, n = drop_nonfinite(item, infinite_ok=infinite_ok)
            items.append(clean)
            count += n
        return items, count
    return value, 0


def first_error(exc: ValidationError) -> str:
    """`key: message` of the first problem, and how many there are."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "row"
    more = f" ({exc.error_count()} problems)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=False)


class EvalRow(_Row):
    """One row of eval_results.jsonl / wer_results.jsonl, as far as the page uses it."""

    utt: str
    status: str | None = None
    ref: str | None = None
    error: str | None = None
    reasons: list[str] = []
    over_30s: bool | None = None
    audio_s: float | None = None
    wer: float | None = None
    hyp: str | None = None
    ref_norm: str | None = None
    hyp_norm: str | None = None
    sim: float | None = None
    dnsmos_ovrl: float | None = None
    utmos: float | None = None
    reference: str | None = None  # the reference prompt eval's SIM compared against
    retained: str | None = None

    @property
    def has_wer(self) -> bool:
        return "wer" in self.model_fields_set

    @property
    def has_sim(self) -> bool:
        return "sim" in self.model_fields_set


class SidecarTimings(_Row):
    rtf: float | None = None
    ttfp_s: float | None = None


class SidecarMeta(_Row):
    """A retention sidecar (failed_speech_*.json) of synth, bench or eval (omnicli.retention)."""

    utt: str | None = None
    reasons: list[str] = []
    text: str | None = None
    expected_text: str | None = None
    status: str | None = None
    error: str | None = None
    duration_s: float | None = None
    timings: SidecarTimings | None = None
    finish_reason: str | None = None
    transcript: str | None = None
    wer: float | None = None
    output_wav: str | None = None
    gen_wav: str | None = None
    reference_wav: str | None = None
    reference: str | None = None  # eval-wer's sidecars: the reference text
    ref_norm: str | None = None
    hyp_norm: str | None = None


_Floats = list[float | None] | None


class BenchRunView(BaseModel):
    """The keys of a bench run (summary entry, per-pass file, --append-result row) the page uses, type-checked;
    the run itself is kept as read (its other keys are shown when known, ignored otherwise)."""

    model_config = ConfigDict(extra="allow")

    label: str | None = None
    profile_label: str | None = None
    started_at: str | None = None
    backend: str | None = None
    max_concurrency: int | None = None
    request_rate: float | None = None  # a number, or "inf" (no rate cap), as vLLM writes it
    completed: float | None = None
    failed: float | None = None
    duration: float | None = None
    rounds: int | None = None
    # the figures the runs table, the sweep and the A/B show (report.page._RUN_KEYS, figures.SWEEP_PANELS)
    audio_throughput: float | None = None
    request_throughput: float | None = None
    mean_audio_ttfp_ms: float | None = None
    p50_audio_ttfp_ms: float | None = None
    p99_audio_ttfp_ms: float | None = None
    mean_e2el_ms: float | None = None
    p50_e2el_ms: float | None = None
    mean_audio_rtf: float | None = None
    mean_audio_underrun_s: float | None = None
    mean_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    round_durations: list[float] | None = None
    # the --save-detailed lists (report.ab.DETAILED)
    utts: list[str | None] | None = None
    request_rounds: list[int | None] | None = None
    start_times: _Floats = None
    audio_ttfps: _Floats = None
    e2els: _Floats = None
    audio_durations: _Floats = None
    audio_rtfs: _Floats = None
    audio_underruns: _Floats = None
    ttfts: _Floats = None
    errors: list[str | None] | None = None
    finish_reasons: list[str | None] | None = None

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "inf":
            raise ValueError("a number or \"inf\"")
        return value

    @field_validator("max_concurrency", "request_rate", "completed", "failed", "duration", "rounds", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a number, not true/false")
        return value
