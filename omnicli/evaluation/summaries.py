"""The evaluation summaries as typed models: validated when written, their JSON Schema from `omni schema eval`.

One model describes both `omni eval-wer`'s wer_summary.json and `omni eval`'s
eval_summary.json: the run's facts always, the WER figures when WER ran (all of
eval-wer; `metrics` holding "wer" for eval), the SIM and MOS figures when those ran.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Metric = Literal["wer", "sim", "mos"]
SCHEMA_VERSION: Literal[1] = 1  # of wer_summary.json and eval_summary.json; raised when a key changes meaning


class _Versioned(BaseModel):
    """The base whose field comes first (pydantic orders inherited fields from the last base)."""

    schema_version: Literal[1] = Field(SCHEMA_VERSION, description="Version of this file's layout.")


class EvalFailure(BaseModel):
    utt: str
    status: str
    error: str | None


class WerFigures(BaseModel):
    """WER figures in percent (x 100, 3 decimals) plus how they were obtained; present when WER ran."""

    seed_wer_mean: float | None = Field(None, description="Mean per-utterance WER (seed-tts-eval's figure).")
    corpus_wer: float | None = None
    median_wer: float | None = None
    share_wer_above_50: float | None = None
    wer_mean_below_50: float | None = None
    sub: float | None = None
    del_: float | None = Field(None, alias="del")
    ins: float | None = None
    wer_mean_failed_as_100: float | None = None
    num_scored: int | None = Field(None, description="Utterances with a WER.")
    num_empty_transcripts: int | None = Field(
        None, description="Empty transcripts, scored as WER 1.0 (seed-tts-eval's rule).")
    num_above_threshold: int | None = None
    num_over_30s: int | None = None
    num_truncated: int | None = None
    key_notes: dict[str, str] | None = None
    units: str | None = None
    high_wer_cut: float | None = None
    language: str | None = None
    asr: dict[str, Any] | None = None
    transcripts_file: str | None = None
    wer_threshold: float | None = None
    asr_s_total: float | None = None
    asr_s_per_utt: float | None = None


class SimFigures(BaseModel):
    """Speaker similarity (cosine, generated vs reference audio); present when SIM ran."""

    sim_mean: float | None = None
    sim_median: float | None = None
    sim_share_below_threshold: float | None = Field(
        None, description="Percent of scored utterances below sim_threshold.")
    sim_threshold: float | None = None
    sim_backend: str | None = Field(None, description="dvector or wavlm: the scale of every SIM figure depends on it.")
    sim_model: str | None = None
    sim_note: str | None = Field(None, description="What the SIM figures are (and are not) comparable to.")
    num_sim_scored: int | None = None
    num_sim_failed: int | None = None
    sim_failed: list[EvalFailure] | None = None
    sim_cpu_s_total: float | None = None
    sim_cpu_s_per_utt: float | None = None
    sim_wall_s_per_utt: float | None = None
    num_low_sim: int | None = Field(None, description="Utterances given the low_sim retention reason.")


class MosFigures(BaseModel):
    """Predicted MOS (1-5); present when MOS ran. The dnsmos_* keys with the dnsmos backend, utmos_* with utmos."""

    dnsmos_ovrl_mean: float | None = None
    dnsmos_sig_mean: float | None = None
    dnsmos_bak_mean: float | None = None
    dnsmos_p808_mean: float | None = None
    dnsmos_ovrl_median: float | None = None
    utmos_mean: float | None = None
    utmos_median: float | None = None
    mos_share_below_threshold: float | None = Field(
        None, description="Percent of scored utterances whose DNSMOS OVRL (or UTMOS) is below mos_threshold."
    )
    mos_threshold: float | None = None
    mos_backends: list[str] | None = None
    mos_models: dict[str, str] | None = None
    mos_notes: dict[str, str] | None = None
    num_mos_scored: int | None = None
    num_mos_failed: int | None = None
    mos_failed: list[EvalFailure] | None = None
    mos_cpu_s_total: float | None = None
    mos_cpu_s_per_utt: float | None = None
    mos_wall_s_per_utt: float | None = None
    num_low_mos: int | None = Field(None, description="Utterances given the low_mos retention reason.")


# The keys a metric's figures must carry when that metric ran (the others may be absent or null).
_REQUIRED = {
    "wer": ("seed_wer_mean", "corpus_wer", "num_scored", "num_empty_transcripts", "language", "asr", "wer_threshold",
            "asr_s_per_utt"),
    "sim": ("sim_mean", "sim_median", "sim_threshold", "sim_backend", "sim_note", "num_sim_scored", "num_sim_failed",
            "sim_cpu_s_per_utt", "num_low_sim"),
    "mos": ("mos_threshold", "mos_backends", "num_mos_scored", "num_mos_failed", "mos_cpu_s_per_utt", "num_low_mos"),
}


class EvalSummary(WerFigures, SimFigures, MosFigures, _Versioned):
    """The summary of `omni eval-wer` (wer_summary.json) or `omni eval` (eval_summary.json)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)  # further metrics may be added beside these

    metrics: list[Metric] = Field(["wer"], description="The metrics that ran (eval-wer: wer only, the key is absent).")
    notes: dict[str, list[str]] | None = Field(
        None, description="utt -> what its scores cannot show: cut to the length cap, a wav shorter than its header, "
        "a symlink out of the folder (docs/eval.md).")
    num_utts: int
    num_missing: int
    num_failed: int
    missing: list[str]
    failed: list[EvalFailure]
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

    @model_validator(mode="after")
    def _figures_of_each_metric(self) -> EvalSummary:
        for metric in self.metrics:
            absent = [k for k in _REQUIRED[metric] if k not in self.model_fields_set]
            if absent:
                raise ValueError(f"{metric} ran but the summary lacks {', '.join(absent)}")
        return self
