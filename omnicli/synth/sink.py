"""The two ends of one manifest row's trip through the engine: the request it becomes
(`prompt_for`), and the results row its record becomes (`RowSink.finish`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from omnicli.driver import Prompt, RequestRecord
from omnicli.driver.inputs import request_from_row
from omnicli.driver.record_sink import RecordSink, is_output_fault
from omnicli.errors import OutputError
from omnicli.manifest import ManifestRow
from omnicli.runtime.clock import utc_now
from omnicli.synth.plan import input_digest, utterance_seed
from omnicli.synth.results import Status, SynthResult

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile
    from omnicli.retention import Retainer


class OutputUnwritable(OutputError, OSError):
    """OUT cannot be written (disk full, I/O error): the run stops, the rest stays pending."""


def prompt_for(row: ManifestRow, resolved: ResolvedProfile, *, max_new_tokens: int | None = None) -> Prompt:
    """The request one row becomes (with its per-utterance seed), built when the driver sends it."""
    seed = utterance_seed(resolved.profile.seed, row.utt)
    return Prompt(
        row.utt,
        reference=str(row.prompt_wav) if row.prompt_wav else None,
        load=lambda: request_from_row(row, max_new_tokens=max_new_tokens, seed=seed),
        text=row.text,
        row=row,
    )


class RowSink:
    """One finished request -> OUT/<utt>.wav (when ok), retained audio (when suspect) and its
    results row, wherever its engine ran: `SynthRun` uses one for a local run, each Ray actor
    of `omni synth --ray` has its own (same OUT). Raises `OutputUnwritable` when OUT cannot be
    written at all (every later row would fail the same way)."""

    def __init__(self, out_dir: Path, resolved: ResolvedProfile, *, retainer: Retainer | None = None):
        self.out_dir = out_dir
        self.resolved = resolved
        self.audio = RecordSink(
            "synth", retainer=retainer, thresholds=resolved.profile.retention, profile_digest=resolved.digest,
            require_audio=True, write_failed=self._write_failed,
        )

    def finish(self, record: RequestRecord) -> SynthResult:
        row = record.prompt.row if record.prompt is not None else None
        assert row is not None, "synth's prompts carry their manifest row (prompt_for)"
        result = SynthResult(
            utt=row.utt, status=Status.FAILED, line=row.line_no, input_digest=input_digest(row),
            profile_digest=self.resolved.digest, error=record.error,
        )
        if record.rejected:  # its input never became a request: nothing to judge or keep
            result.finished_at = utc_now()
            return result
        result.audio_seconds = record.audio_duration
        result.ttfp_s = record.audio_ttfp
        result.e2el_s, result.rtf = record.e2el_to_last_chunk, record.rtf_to_last_chunk
        if record.info is not None:
            result.finish_reason, result.ref_cache = record.info.finish_reason, record.info.ref_cache
        kept = self.audio.keep(record, self.out_dir / f"{row.utt}.wav", text=row.text)
        result.flags, result.error = kept.flags, kept.error
        if kept.wav is not None:
            result.status, result.wav = Status.OK, kept.wav.name
        result.retained = str(kept.retained) if kept.retained else None
        result.retention_error = kept.retention_error
        result.finished_at = utc_now()
        return result

    def _write_failed(self, path: Path, exc: OSError) -> str:
        if is_output_fault(exc):  # every later row would fail the same way: the run stops
            raise OutputUnwritable(f"cannot write {path}: {exc}") from exc
        return f"could not write {path}: {exc}"
