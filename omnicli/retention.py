"""Failed-audio retention (docs/metrics.md, "Failed-audio retention").

`judge_audio` decides which audio-level reasons apply to one output; a
`Retainer` keeps the suspect ones as `failed_speech_<sha16>.wav` + `.json`
in a folder chosen with `--keep-failed DIR` or `OMNI_FAILED_SPEECH_AUDIO_DIR`.
Retention is a side channel: `Retainer.keep` never raises, so a full disk
or an unwritable folder cannot hide or replace the failure being recorded.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import soundfile as sf

from omnicli.atomic import write_bytes_atomic, write_json_atomic
from omnicli.audio import rms_dbfs
from omnicli.profile.schema import RetentionConfig
from omnicli.runtime.clock import utc_now

if TYPE_CHECKING:
    from omnicli.driver.records import RequestRecord

log = logging.getLogger(__name__)

ENV_VAR = "OMNI_FAILED_SPEECH_AUDIO_DIR"
FILE_PREFIX = "failed_speech_"


class Reason(str, Enum):
    """Why an output is suspect; the values are what results rows and sidecars store."""

    # Audio-level reasons, in the order docs/metrics.md lists them (judge_audio keeps it).
    ERROR = "error"
    EMPTY = "empty"
    NEAR_SILENT = "near_silent"
    HIT_CAP = "hit_cap"
    TOO_LONG = "too_long"
    CLIPPED = "clipped"
    # Reasons only `eval-wer` can judge (it has a transcript).
    ASR_MISMATCH = "asr_mismatch"
    ASR_EMPTY = "asr_empty"
    # Reasons only `omni eval` can judge (it scores speaker similarity / predicted MOS).
    LOW_SIM = "low_sim"
    LOW_MOS = "low_mos"

    def __str__(self) -> str:
        return self.value


# A sample counts as "at full scale" from this magnitude on (float PCM in [-1, 1]);
# the profile schema documents the same bound for `clipped_share`.
FULL_SCALE = 0.999


def judge_audio(
    pcm: np.ndarray | None,
    sample_rate: int,
    *,
    text: str | None = None,
    finish_reason: str | None = None,
    error: str | BaseException | None = None,
    thresholds: RetentionConfig | None = None,
) -> list[Reason]:
    """Returns the audio-level retention reasons that apply (empty list: nothing suspect).

    `pcm` is float PCM, mono (n,) or (n, channels); `None` counts as no samples.
    `too_long` is judged only when `text` is given; `hit_cap` when
    `finish_reason == "length"`; `error` whenever `error` is not None.
    """
    limits = thresholds or RetentionConfig()
    reasons: list[Reason] = []
    if error is not None:
        reasons.append(Reason.ERROR)
    audio = np.zeros(0, dtype=np.float32) if pcm is None else np.asarray(pcm)
    frames = audio.shape[0] if audio.ndim else 0
    if frames == 0 or audio.size == 0:
        reasons.append(Reason.EMPTY)
    else:
        if rms_dbfs(audio) < limits.near_silent_dbfs:
            reasons.append(Reason.NEAR_SILENT)
    if finish_reason == "length":
        reasons.append(Reason.HIT_CAP)
    if frames and text is not None and frames / sample_rate > limits.too_long_limit_s(text):
        reasons.append(Reason.TOO_LONG)
    if frames and float(np.mean(np.abs(audio) >= FULL_SCALE)) > limits.clipped_share:
        reasons.append(Reason.CLIPPED)
    return reasons


def audio_digest(pcm: np.ndarray) -> str:
    """sha256 of the samples as little-endian float32 bytes (what names a retained file)."""
    data = np.ascontiguousarray(np.asarray(pcm, dtype="<f4")).tobytes()
    return hashlib.sha256(data).hexdigest()


def _float_wav_bytes(pcm: np.ndarray, sample_rate: int) -> bytes:
    # 32-bit float keeps the judged samples exactly (no requantisation to 16 bit).
    buf = io.BytesIO()
    sf.write(buf, np.asarray(pcm, dtype=np.float32), sample_rate, format="WAV", subtype="FLOAT")
    return buf.getvalue()


def _ordered_union(*groups: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for group in groups:
        for reason in group:
            if reason not in seen:
                seen.append(reason)
    return seen


class Retainer:
    """Writes suspect outputs to one folder; thread-safe, never raises from `keep`.

    `kept` counts files written or updated, `errors` the writes that failed
    (each also logged as a warning and remembered in `error_messages`).
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()
        self.kept = 0
        self.errors = 0
        self.error_messages: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def from_option(cls, directory: str | os.PathLike | None) -> Retainer | None:
        """The CLI's `--keep-failed DIR`, else `$OMNI_FAILED_SPEECH_AUDIO_DIR`, else None (off)."""
        if directory is not None and str(directory) != "":
            return cls(directory)
        env = os.environ.get(ENV_VAR, "").strip()
        return cls(env) if env else None

    def count(self, *, kept: bool, error: str | None) -> None:
        """Counts a keep done by another process into the same folder (an actor of `synth --ray`)."""
        with self._lock:
            self.kept += int(kept)
            if error is not None:
                self.errors += 1
                self.error_messages.append(error)

    def paths_for(self, digest: str) -> tuple[Path, Path]:
        stem = FILE_PREFIX + digest[:16]
        return self.directory / f"{stem}.wav", self.directory / f"{stem}.json"

    def keep(
        self,
        pcm: np.ndarray | None,
        sample_rate: int,
        reasons: Iterable[str],
        meta: Mapping[str, Any] | None = None,
    ) -> Path | None:
        """Retains one output; returns the wav path, or None (no reasons, or the write failed).

        `meta` is whatever the caller knows (utt, text, reference, transcript,
        expected text, timings, error, profile_digest, ...): it is stored as
        given, beside reasons, sample_rate, duration_s and created_at. Keeping
        identical audio again reuses the file and adds the new occurrence.
        """
        reasons = list(reasons)
        if not reasons:
            return None
        try:
            with self._lock:
                return self._keep(pcm, sample_rate, reasons, dict(meta or {}))
        except Exception as exc:  # retention must never take the run down
            message = f"could not retain failed audio in {self.directory}: {exc}"
            log.warning(message)
            with self._lock:
                self.errors += 1
                self.error_messages.append(message)
            return None

    def _keep(self, pcm, sample_rate: int, reasons: list[str], meta: dict) -> Path:
        audio = np.zeros(0, dtype=np.float32) if pcm is None else np.asarray(pcm, dtype=np.float32)
        digest = audio_digest(audio)
        wav_path, json_path = self.paths_for(digest)
        self.directory.mkdir(parents=True, exist_ok=True)
        if not wav_path.exists():
            write_bytes_atomic(wav_path, _float_wav_bytes(audio, sample_rate))

        now = utc_now()
        occurrence = {**meta, "reasons": reasons, "kept_at": now}
        previous = self._read_previous(json_path)
        occurrences = list(previous.get("occurrences", [])) if previous else []
        occurrences.append(occurrence)
        record = {
            **meta,  # the latest caller's fields at top level, for a quick look
            "reasons": _ordered_union(previous.get("reasons", []) if previous else [], reasons),
            "sample_rate": int(sample_rate),
            "num_samples": int(audio.shape[0]) if audio.ndim else 0,
            "channels": int(audio.shape[1]) if audio.ndim == 2 else 1,
            "duration_s": round(audio.shape[0] / sample_rate, 6) if audio.ndim and sample_rate else 0.0,
            "audio_sha256": digest,
            "wav": wav_path.name,
            "created_at": previous.get("created_at", now) if previous else now,
            "updated_at": now,
            "occurrences": occurrences,
        }
        write_json_atomic(json_path, record)
        self.kept += 1
        return wav_path

    @staticmethod
    def _read_previous(json_path: Path) -> dict | None:
        if not json_path.exists():
            return None
        try:
            obj = json.loads(json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # a damaged sidecar is rewritten from this occurrence
        return obj if isinstance(obj, dict) else None


def request_meta(
    record: RequestRecord,
    *,
    command: str,
    profile_digest: str | None,
    output_wav: str | os.PathLike | None = None,
    status: str | None = None,
    error: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict:
    """A retained request's metadata (the one builder synth and bench share).

    `status` and `error` default to the request's own outcome; a caller
    whose later step failed (the wav could not be written) passes its own.
    `extra` (a bench pass and round, ...) is added as given.
    """
    row = record.prompt.row if record.prompt is not None else None
    return {
        "utt": record.utt,
        "request_id": record.request_id,
        "source": row.where if row is not None else None,
        "text": record.text,
        "expected_text": record.text,
        "transcript": None,  # synth and bench have no ASR; eval-wer fills it
        "reference_wav": record.reference,
        "reference_text": row.prompt_text if row is not None else None,
        "error": record.error if error is None and status is None else error,
        "status": status or ("ok" if record.ok else "failed"),
        "finish_reason": record.finish_reason,
        "ref_cache": record.ref_cache,
        "timings": {"ttfp_s": record.audio_ttfp, "e2el_s": record.e2el, "audio_seconds": record.audio_duration,
                    "rtf": record.audio_rtf},
        "output_wav": str(output_wav) if output_wav else None,
        "profile_digest": profile_digest,
        "command": command,
        **(extra or {}),
    }
