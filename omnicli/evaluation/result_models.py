"""The `omni eval-wer` summary (wer_summary.json) as a typed model: validated when written, its JSON Schema from `omni schema eval`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EvalFailure(BaseModel):
    utt: str
    status: str
    error: str | None


class EvalSummary(BaseModel):
    """WER figures in percent (x 100, 3 decimals) plus how they were obtained."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)  # further metrics may be added beside the WER ones

    seed_wer_mean: float | None = Field(description="Mean per-utterance WER (seed-tts-eval's figure).")
    corpus_wer: float | None
    median_wer: float | None
    share_wer_above_50: float | None
    wer_mean_below_50: float | None
    sub: float | None
    del_: float | None = Field(alias="del")
    ins: float | None
    wer_mean_failed_as_100: float | None
    num_utts: int
    num_scored: int
    num_missing: int
    num_failed: int
    num_empty_transcripts: int = Field(description="Empty transcripts, scored as WER 1.0 (seed-tts-eval's rule).")
    missing: list[str]
    failed: list[EvalFailure]
    num_above_threshold: int
    num_over_30s: int
    num_truncated: int
    key_notes: dict[str, str]
    units: str
    high_wer_cut: float
    language: str
    asr: dict[str, Any] | None
    transcripts_file: str | None
    wer_threshold: float
    keep_failed: str | None
    num_retained: int
    retention_errors: int
    manifest: str | None
    gen_dir: str | None
    profile: str | None
    profile_digest: str | None
    omni_version: str
    started_at: str
    wall_s: float
    asr_s_total: float
    asr_s_per_utt: float | None
