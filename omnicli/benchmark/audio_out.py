"""What a measured round leaves on disk besides the numbers.

`--audio-out DIR` keeps the generated audio (`DIR/<utt>.wav`, the layout
`omni eval-wer` reads; one sub-folder per pass when there are several) and
`--keep-failed DIR` retains failed or suspect outputs through
`omnicli.retention`. Both run between rounds, never inside the timed part.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omnicli.atomic import folder_write_error
from omnicli.audio import write_wav_atomic
from omnicli.benchmark.session import ProfileRun, RoundResult
from omnicli.driver import LoadShape
from omnicli.retention import Retainer, judge_audio, request_meta
from omnicli.synthesis import is_output_fault


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


class RoundOutputs:
    def __init__(
        self,
        audio_dir: str | Path | None,
        retainer: Retainer | None,
        *,
        one_pass: bool,
        warn: Callable[[str], None] = lambda _message: None,
    ):
        self.audio_dir = Path(audio_dir) if audio_dir is not None else None
        self.retainer = retainer
        self.one_pass = one_pass
        self.warn = warn
        self.wavs_written = 0
        self.retained = 0
        self._written: set[Path] = set()
        self.error: str | None = None  # the audio folder cannot be written (disk full, read-only): the run stops
        self.unwritten: dict[Path, int] = {}  # pass folder -> clips that could not be written there

    def check(self) -> str | None:
        """Why --audio-out cannot be written at all (checked before the engine starts), or None."""
        return None if self.audio_dir is None else folder_write_error(self.audio_dir)

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
                if path not in self._written and self.error is None:
                    try:
                        write_wav_atomic(path, rec.pcm, sample_rate)
                        self._written.add(path)
                        self.wavs_written += 1
                        written = path
                    except OSError as exc:
                        self.unwritten[target] = self.unwritten.get(target, 0) + 1
                        if is_output_fault(exc):  # every later wav would fail too: stop, as synth does
                            self.error = f"cannot write {path}: {exc}"
                        else:
                            self.warn(f"could not write {path}: {exc}")
            if self.retainer is not None:
                reasons = judge_audio(
                    rec.pcm, sample_rate, text=rec.text, finish_reason=rec.finish_reason,
                    error=rec.error, thresholds=thresholds,
                )
                if reasons:
                    meta = request_meta(
                        rec, command="bench", profile_digest=digest, output_wav=written,
                        extra={"profile": run.label, "pass": shape.label, "round": index},
                    )
                    if self.retainer.keep(rec.pcm, sample_rate, reasons, meta) is not None:
                        self.retained += 1
