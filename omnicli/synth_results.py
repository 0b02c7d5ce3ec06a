"""Moved to `omnicli.synth.results`: re-exported for importers not yet updated."""

from omnicli.synth.results import (
    MAX_AUDIO_SECONDS,
    FailedRow,
    RetentionTotals,
    Status,
    SynthResult,
    SynthSummary,
    ThisRun,
)

__all__ = ["MAX_AUDIO_SECONDS", "FailedRow", "RetentionTotals", "Status", "SynthResult", "SynthSummary", "ThisRun"]
