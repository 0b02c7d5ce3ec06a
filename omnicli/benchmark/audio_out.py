"""What a measured round leaves on disk besides the numbers.

`--audio-out DIR` keeps the generated audio (`DIR/<utt>.wav`, the layout
`omni eval-wer` reads; one sub-folder per pass when there are several) and
`--keep-failed DIR` retains failed or suspect outputs through
`omnicli.retention`; both through the record sink synth uses too
(`omnicli.driver.record_sink`). They run between rounds, never inside the timed part.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from omnicli.atomic import folder_write_error
from omnicli.benchmark.session import ProfileRun, RoundResult
from omnicli.driver import LoadShape
from omnicli.driver.record_sink import RecordSink, is_output_fault
from omnicli.retention import Retainer

if TYPE_CHECKING:
    from omnicli.driver.pool import EngineFacts


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

    def handle(self, run: ProfileRun, shape: LoadShape, index: int, result: RoundResult, engine: EngineFacts) -> None:
        target = self.pass_dir(run, shape)
        resolved = run.profile
        sink = RecordSink(
            "bench", retainer=self.retainer, thresholds=resolved.profile.retention, profile_digest=resolved.digest,
            write_failed=lambda path, exc: self._write_failed(target, path, exc),
        )
        extra = {"profile": run.label, "pass": shape.label, "round": index}
        for rec in result.records:
            path = target / f"{rec.utt}.wav" if target is not None else None
            # Prompts cycle and rounds repeat: keep one file per utterance, the first.
            wanted = path if path is not None and path not in self._written and self.error is None else None
            kept = sink.keep(rec, wanted, extra=extra)
            if kept.wav is not None:
                self._written.add(kept.wav)
                self.wavs_written += 1
            if kept.retained is not None:
                self.retained += 1

    def _write_failed(self, target: Path | None, path: Path, exc: OSError) -> None:
        """A wav that could not be written: counted; a full disk stops the run, as synth's does."""
        assert target is not None
        self.unwritten[target] = self.unwritten.get(target, 0) + 1
        if is_output_fault(exc):  # every later wav would fail too
            self.error = f"cannot write {path}: {exc}"
        else:
            self.warn(f"could not write {path}: {exc}")
