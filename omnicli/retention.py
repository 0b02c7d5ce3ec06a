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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import soundfile as sf

from omnicli.atomic import write_bytes_atomic, write_json_atomic
from omnicli.audio import rms_dbfs

log = logging.getLogger(__name__)

ENV_VAR = "OMNI_FAILED_SPEECH_AUDIO_DIR"
FILE_PREFIX = "failed_speech_"

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
ALL_REASONS = (ERROR, EMPTY, NEAR_SILENT, HIT_CAP, TOO_LONG, CLIPPED, ASR_MISMATCH, ASR_EMPTY)

# A sample counts as "at full scale" from this magnitude on (float PCM in [-1, 1]);
# the profile schema documents the same bound for `clipped_share`.
FULL_SCALE = 0.999


@dataclass(frozen=True)
class RetentionThresholds:
    """The rules' knobs; defaults equal the profile's `retention` section."""

    near_silent_dbfs: float = -60.0
    clipped_share: float = 0.01
    too_long_s_per_char: float = 0.5
    too_long_min_s: float = 10.0
    asr_wer_threshold: float = 0.5

    @classmethod
    def from_config(cls, config: Any | None) -> "RetentionThresholds":
        """Builds from anything with the same attribute names (e.g. the profile's RetentionConfig)."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        defaults = cls()
        values = {name: getattr(config, name, getattr(defaults, name)) for name in cls.__dataclass_fields__}
        return cls(**{k: float(v) for k, v in values.items()})

    def too_long_limit_s(self, text: str) -> float:
        return max(self.too_long_min_s, self.too_long_s_per_char * len(text))


def judge_audio(
    pcm: np.ndarray | None,
    sample_rate: int,
    *,
    text: str | None = None,
    finish_reason: str | None = None,
    error: str | BaseException | None = None,
    thresholds: Any | None = None,
) -> list[str]:
    """Returns the audio-level retention reasons that apply (empty list: nothing suspect).

    `pcm` is float PCM, mono (n,) or (n, channels); `None` counts as no samples.
    `too_long` is judged only when `text` is given; `hit_cap` when
    `finish_reason == "length"`; `error` whenever `error` is not None.
    """
    limits = RetentionThresholds.from_config(thresholds)
    reasons: list[str] = []
    if error is not None:
        reasons.append(ERROR)
    audio = np.zeros(0, dtype=np.float32) if pcm is None else np.asarray(pcm)
    frames = audio.shape[0] if audio.ndim else 0
    if frames == 0 or audio.size == 0:
        reasons.append(EMPTY)
    else:
        if rms_dbfs(audio) < limits.near_silent_dbfs:
            reasons.append(NEAR_SILENT)
    if finish_reason == "length":
        reasons.append(HIT_CAP)
    if frames and text is not None and frames / sample_rate > limits.too_long_limit_s(text):
        reasons.append(TOO_LONG)
    if frames and float(np.mean(np.abs(audio) >= FULL_SCALE)) > limits.clipped_share:
        reasons.append(CLIPPED)
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    def from_option(cls, directory: str | os.PathLike | None) -> "Retainer | None":
        """The CLI's `--keep-failed DIR`, else `$OMNI_FAILED_SPEECH_AUDIO_DIR`, else None (off)."""
        if directory is not None and str(directory) != "":
            return cls(directory)
        env = os.environ.get(ENV_VAR, "").strip()
        return cls(env) if env else None

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

        now = _now()
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
