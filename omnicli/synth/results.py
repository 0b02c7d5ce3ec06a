"""What `omni synth` writes besides wavs: results.jsonl rows and summary.json, as typed models.

One definition each: rows are validated when written and read back typed
(resume plans from them), and `omni schema results|summary` prints their
JSON Schema for downstream tools.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from omnicli.engine.request import FinishReason, RefCache
from omnicli.retention import Reason

MAX_AUDIO_SECONDS = 1e6  # 11.6 days: longer than any wav can hold (4 GiB of 16-bit samples at 8 kHz is 3 days)


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class SynthResult(BaseModel):
    """One row of results.jsonl: one finished utterance (the latest row of an utt wins)."""

    # Rows written by earlier versions may carry other keys: ignored when read back.
    # NaN, infinities and absurd lengths (a hand-edited row) do not validate: such a row counts as absent.
    model_config = ConfigDict(extra="ignore", validate_assignment=True, allow_inf_nan=False)

    utt: str
    status: Status
    line: int = Field(0, description="Line of the row in the manifest (1-based).")
    wav: str | None = Field(None, description="OUT/<wav>, set when status is ok.")
    audio_seconds: float = Field(0.0, ge=0.0, le=MAX_AUDIO_SECONDS)
    ttfp_s: float | None = Field(None, description="First audio minus submission, seconds.")
    e2el_s: float | None = Field(None, description="Last audio minus submission, seconds.")
    rtf: float | None = Field(None, description="e2el_s / audio_seconds.")
    finish_reason: FinishReason | None = Field(None, description="stop, or length (cut by the token cap).")
    ref_cache: RefCache | None = Field(
        None, description="hot, cold or none: whether the reference's codes were cached.")
    flags: list[Reason] = Field(default_factory=list, description="Suspect-audio reasons (see retention).")
    error: str | None = None
    retained: str | None = Field(None, description="Path of the retained copy, when retention kept it.")
    retention_error: str | None = None
    input_digest: str = Field(
        "", description="What was synthesized (text, reference); a changed manifest row is redone.")
    profile_digest: str = ""
    finished_at: str = ""

    def to_line(self) -> str:
        """The row as one results.jsonl line (without the newline)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)


class ThisRun(BaseModel):
    attempted: int
    ok: int
    failed: int
    left_pending: list[str] = Field(description="Cut off by a stop, an engine failure or an output folder that "
                                                "could not be written; a resume retries them.")
    wall_seconds: float
    audio_seconds: float = Field(description="Audio of this run's ok rows.")
    audio_throughput: float = Field(description="audio_seconds / wall_seconds of this run (ok rows only).")
    failed_audio_seconds: float = Field(0.0, description="Audio this run's failed rows produced before failing "
                                                         "(not in audio_seconds or audio_throughput).")


class RetentionTotals(BaseModel):
    dir: str
    kept: int
    errors: list[str]


class FailedRow(BaseModel):
    utt: str
    line: int | None = None
    error: str | None = None


class SynthSummary(BaseModel):
    """summary.json: totals over every manifest row (this run and earlier ones into the same OUT)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    manifest: str
    out_dir: str
    num_rows: int
    num_invalid_rows: int
    num_ok: int
    num_failed: int
    num_pending: int
    audio_seconds: float = Field(description="Total audio of every ok row.")
    interrupted: bool
    engine_error: str | None = Field(
        description="Why the engine stopped serving; null after a stop the user asked for.")
    output_error: str | None = Field(None, description="Why OUT could not be written (disk full, I/O error): "
                                                       "the run stopped, unfinished rows are pending.")
    this_run: ThisRun
    retention: RetentionTotals | None
    invalid_rows: list[str] = Field(description="`file:line: reason` of each row that could not be read.")
    limit: int | None = Field(
        None, description="--limit: only the first N valid rows of the manifest count (null: all).")
    shard: str | None = Field(None, description="--shard I/N: this folder holds shard I of N (rows by a hash of "
                                                "the utt); null for a whole run or a merge.")
    failed: list[FailedRow]
    model: str
    profile: dict[str, Any] = Field(description="The resolved profile (every setting).")
    profile_name: str | None
    profile_digest: str
    started_at: str
    finished_at: str
    omni_version: str
