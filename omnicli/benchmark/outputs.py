"""What a measured round leaves on disk besides the numbers.

`--audio-out DIR` keeps the generated audio (`DIR/<utt>.wav`, the layout
`omni eval-wer` reads; one sub-folder per pass when there are several) and
`--keep-failed DIR` retains failed or suspect outputs through
`omnicli.retention`. Both run between rounds, never inside the timed part.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from omnicli.audio import write_wav_atomic
from omnicli.benchmark.loadgen import LoadShape
from omnicli.benchmark.metrics import RequestRecord
from omnicli.benchmark.runner import RoundResult
from omnicli.benchmark.session import ProfileRun
from omnicli.retention import Retainer, judge_audio


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


class RoundOutputs:
    def __init__(
        self,
        audio_dir: str | Path | None,
        retainer: Retainer | None,
        *,
        one_pass: bool,
        warn: Callable[[str], None] = lambda message: None,
    ):
        self.audio_dir = Path(audio_dir) if audio_dir is not None else None
        self.retainer = retainer
        self.one_pass = one_pass
        self.warn = warn
        self.wavs_written = 0
        self.retained = 0
        self._written: set[Path] = set()

    @property
    def needs_pcm(self) -> bool:
        return self.audio_dir is not None or self.retainer is not None

    def pass_dir(self, run: ProfileRun, shape: LoadShape) -> Path | None:
        if self.audio_dir is None:
            return None
        if self.one_pass:
            return self.audio_dir
        return self.audio_dir / safe_name(f"{run.label}_{shape.label}")

    def handle(self, run: ProfileRun, shape: LoadShape, index: int, result: RoundResult, engine: Any) -> None:
        sample_rate = int(engine.sample_rate)
        target = self.pass_dir(run, shape)
        thresholds = getattr(getattr(run.profile, "profile", None), "retention", None)
        digest = getattr(run.profile, "digest", None)
        for rec in result.records:
            written: Path | None = None
            if target is not None and rec.nonempty and rec.pcm is not None:
                path = target / f"{rec.utt}.wav"
                # Prompts cycle and rounds repeat: keep one file per utterance, the first.
                if path not in self._written:
                    try:
                        write_wav_atomic(path, rec.pcm, sample_rate)
                        self._written.add(path)
                        self.wavs_written += 1
                        written = path
                    except OSError as exc:
                        self.warn(f"could not write {path}: {exc}")
            if self.retainer is not None:
                reasons = judge_audio(
                    rec.pcm, sample_rate, text=rec.text, finish_reason=rec.finish_reason,
                    error=rec.error, thresholds=thresholds,
                )
                if reasons:
                    meta = {**retention_meta(rec, written, digest), "profile": run.label, "pass": shape.label, "round": index}
                    if self.retainer.keep(rec.pcm, sample_rate, reasons, meta) is not None:
                        self.retained += 1


def retention_meta(rec: RequestRecord, output_wav: Path | None, profile_digest: str | None) -> dict:
    """A retained request's metadata, under the keys `omni synth` uses for the same facts."""
    return {
        "utt": rec.utt,
        "request_id": rec.request_id,
        "text": rec.text,
        "expected_text": rec.text,
        "transcript": None,  # bench has no ASR; eval-wer fills it
        "reference_wav": rec.reference,
        "error": rec.error,
        "status": "ok" if rec.ok else "failed",
        "finish_reason": rec.finish_reason,
        "ref_cache": rec.ref_cache,
        "timings": {"ttfp_s": rec.audio_ttfp, "e2el_s": rec.e2el, "audio_seconds": rec.audio_duration, "rtf": rec.audio_rtf},
        "output_wav": str(output_wav) if output_wav else None,
        "profile_digest": profile_digest,
        "command": "bench",
    }
