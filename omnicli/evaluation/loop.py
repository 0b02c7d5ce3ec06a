"""The one loop over the manifest rows of an evaluation: each generated wav decoded once, for every metric.

A `Stage` is one metric family's batched scorer (WER through ASR or cached
transcripts, SIM / MOS through the scorers). `score_rows` hands every stage
the row and a `DecodeOnce` of its wav: whichever stage asks first decodes
the file, the others get the same clip (each takes its own cut of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from omnicli.evaluation.clips import ClipRead, read_generated
from omnicli.manifest import ManifestRow


class DecodeOnce:
    """GEN/<utt>.wav, decoded on the first call and remembered for the next ones."""

    def __init__(self, wav: Path, folder: Path, max_seconds: float):
        self.wav, self.folder, self.max_seconds = wav, folder, max_seconds
        self._read: ClipRead | None = None

    def __call__(self) -> ClipRead:
        if self._read is None:
            self._read = read_generated(self.wav, self.folder, max_seconds=self.max_seconds)
        return self._read


class Stage(Protocol):
    @property
    def read_seconds(self) -> float:
        """How much of each file this stage scores (the loop decodes the longest any stage needs)."""
        ...

    def add(self, index: int, row: ManifestRow, audio: DecodeOnce) -> None:
        """Takes one row; scores it now or when its batch is full."""

    def finish(self) -> None:
        """Scores what is still pending."""


def score_rows(rows: Sequence[ManifestRow], folder: Path, stages: Sequence[Stage]) -> None:
    """Every row through every stage, in manifest order; each wav decoded at most once."""
    max_seconds = max(stage.read_seconds for stage in stages)
    for index, row in enumerate(rows):
        audio = DecodeOnce(folder / f"{row.utt}.wav", folder, max_seconds)
        for stage in stages:
            stage.add(index, row, audio)
    for stage in stages:
        stage.finish()
