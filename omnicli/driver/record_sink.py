"""What a finished request's audio goes through, in `omni synth` and `omni bench` alike:
judge it, write its wav atomically, retain it when suspect.

    kept = RecordSink("synth", retainer=..., thresholds=..., profile_digest=...).keep(record, wav_path)

One order for both commands: the judging (`retention.judge_audio`) only reads the
samples, so it comes first; the wav is written only for a request that ended ok with
audio; the retained copy's metadata then says whether that write succeeded.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omnicli.audio import write_wav_atomic
from omnicli.retention import Reason, Retainer, judge_audio, request_meta

if TYPE_CHECKING:
    from omnicli.driver.records import RequestRecord
    from omnicli.profile.schema import RetentionConfig

NO_AUDIO = "the engine returned no audio"

# OSErrors that belong to one output file's name rather than to the folder or its disk.
_ONE_FILE_ERRNOS = frozenset({errno.EISDIR, errno.ENAMETOOLONG})


def is_output_fault(exc: OSError) -> bool:
    """True when writing into an output folder failed for a reason every later write shares
    (disk full, quota, read-only, I/O error, folder gone), not one file's own problem."""
    return exc.errno not in _ONE_FILE_ERRNOS


@dataclass
class KeptAudio:
    """What `RecordSink.keep` did with one record."""

    flags: list[Reason] = field(default_factory=list)  # why the audio is suspect (empty: it is not)
    wav: Path | None = None  # the wav written
    error: str | None = None  # the request's error, else why its audio was not written (None: ok)
    retained: Path | None = None  # the retained copy
    retention_error: str | None = None  # why retaining it failed


class RecordSink:
    """judge -> write the wav atomically -> retain, for one record at a time.

    `require_audio`: a request that ended ok without samples counts as failed
    (synth: a row needs a wav); otherwise it stays ok, with nothing written (bench).
    `write_failed(path, exc)` decides what an OSError writing the wav means: it
    raises to stop the caller's run (a full disk), or returns the error to record
    for the request (None: the request keeps its own outcome).
    """

    def __init__(
        self,
        command: str,
        *,
        retainer: Retainer | None,
        thresholds: RetentionConfig | None,
        profile_digest: str | None,
        require_audio: bool = False,
        write_failed: Callable[[Path, OSError], str | None] = lambda _path, _exc: None,
    ):
        self.command = command
        self.retainer = retainer
        self.thresholds = thresholds
        self.profile_digest = profile_digest
        self.require_audio = require_audio
        self.write_failed = write_failed

    def keep(
        self, record: RequestRecord, wav_path: Path | None, *, text: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> KeptAudio:
        """Judges `record` (its `pcm` must be kept), writes it to `wav_path` (None: no wav wanted)
        when it ended ok with audio, then retains it when suspect. `text` is what it should say
        (default: the request's)."""
        pcm, sr = record.pcm, record.sample_rate
        kept = KeptAudio(error=record.error)
        kept.flags = judge_audio(
            pcm, sr, text=record.text if text is None else text, finish_reason=record.finish_reason,
            error=record.error, thresholds=self.thresholds,
        )
        has_audio = pcm is not None and len(pcm) > 0
        if kept.error is None and not has_audio and self.require_audio:
            kept.error = NO_AUDIO
        if kept.error is None and has_audio and wav_path is not None and pcm is not None:
            try:
                write_wav_atomic(wav_path, pcm, sr)
                kept.wav = wav_path
            except OSError as exc:
                kept.error = self.write_failed(wav_path, exc)  # may raise: the caller's run stops
        if self.retainer is not None and kept.flags:
            self._retain(record, kept, extra)
        return kept

    def _retain(self, record: RequestRecord, kept: KeptAudio, extra: Mapping[str, Any] | None) -> None:
        assert self.retainer is not None
        errors_before = self.retainer.errors
        meta = request_meta(
            record, command=self.command, profile_digest=self.profile_digest, output_wav=kept.wav,
            status="ok" if kept.error is None else "failed", error=kept.error, extra=extra,
        )
        kept.retained = self.retainer.keep(record.pcm, record.sample_rate, kept.flags, meta)
        if self.retainer.errors > errors_before:
            kept.retention_error = self.retainer.error_messages[-1]
