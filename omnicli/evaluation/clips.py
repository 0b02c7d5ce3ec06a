"""Generated audio as every eval metric reads it: decoded once, bounded in length, with notes on what is odd.

A clip is read from its file's start, at most the seconds its consumers need
(plus a margin the resampler needs), so memory per clip is bounded whatever
the file holds; `omnicli.audio.load_audio` refuses an implausible sample rate
or length from the header before anything is read or resampled. Each
consumer then takes its own cut (`Clip.cut`): Whisper's 30 s window for ASR,
`MAX_CLIP_SECONDS` for the SIM / MOS scorers. What the scores cannot show is
said in `notes`: a clip scored on its first seconds only, a wav whose header
declares more audio than the file holds, a symlink leading out of the folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import soundfile as sf

from omnicli.audio import AudioError, load_audio, resample, to_mono, wav_data_sizes
from omnicli.evaluation.asr.base import SAMPLE_RATE
from omnicli.evaluation.results import EvalStatus

MAX_CLIP_SECONDS = 60.0  # longer clips are scored on their first 60 s (docs/eval.md)
_MARGIN_S = 1.0  # read past the cut, so the resampled clip is the same as from the whole file


@dataclass
class Clip:
    pcm: np.ndarray  # 16 kHz mono float32
    duration_s: float  # of the whole file, from its header
    truncated: bool = False  # pcm holds only the file's first seconds (see `cut`)
    notes: list[str] = field(default_factory=list)

    def cut(self, max_seconds: float) -> Clip:
        """The clip's first `max_seconds`, noted as such when the file is longer."""
        limit = int(max_seconds * SAMPLE_RATE)
        if not (self.duration_s > max_seconds and self.pcm.shape[0] > limit):
            return self
        note = f"scored on the first {max_seconds:g} s of {self.duration_s:.1f} s"
        return replace(self, pcm=self.pcm[:limit], truncated=True, notes=[*self.notes, note])


def decode_clip(path: Path, folder: Path, *, max_seconds: float = MAX_CLIP_SECONDS) -> Clip:
    """Reads `path` (a file of `folder`) at 16 kHz mono, enough of it for a cut at `max_seconds`
    (not cut yet: each consumer takes its own `Clip.cut`). Raises AudioError when it cannot be used."""
    notes = _file_notes(path, folder)
    pcm, sr = load_audio(path, max_seconds=max_seconds + _MARGIN_S)
    duration = sf.info(str(path)).frames / sr
    return Clip(resample(to_mono(pcm), sr, SAMPLE_RATE), duration, notes=notes)


def load_clip(path: Path, folder: Path, *, max_seconds: float = MAX_CLIP_SECONDS) -> Clip:
    """`path` read and cut to `max_seconds`; raises AudioError when it cannot be used."""
    return decode_clip(path, folder, max_seconds=max_seconds).cut(max_seconds)


@dataclass
class ClipRead:
    """One generated wav as the evaluation found it: a clip, or why there is none."""

    status: EvalStatus  # OK, MISSING, EMPTY_AUDIO or UNREADABLE
    clip: Clip | None = None
    error: str | None = None


def read_generated(wav: Path, folder: Path, *, max_seconds: float = MAX_CLIP_SECONDS) -> ClipRead:
    """GEN/<utt>.wav decoded once for every metric, or the status that says why it cannot be scored."""
    if not wav.is_file():
        return ClipRead(EvalStatus.MISSING, error=f"{wav} not found")
    try:
        clip = decode_clip(wav, folder, max_seconds=max_seconds)
    except AudioError as exc:
        return ClipRead(EvalStatus.EMPTY_AUDIO if empty_file(wav) else EvalStatus.UNREADABLE, error=str(exc))
    if clip.pcm.shape[0] == 0:  # resampling a few samples can leave none
        return ClipRead(EvalStatus.EMPTY_AUDIO, error=f"{wav}: no samples at {SAMPLE_RATE} Hz")
    return ClipRead(EvalStatus.OK, clip)


def empty_file(path: Path) -> bool:
    """A zero-byte file, or a file that parses but holds no samples."""
    try:
        return path.stat().st_size == 0 or sf.info(str(path)).frames == 0
    except Exception:
        return False


def _file_notes(path: Path, folder: Path) -> list[str]:
    notes = []
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(folder.resolve()):
            notes.append(f"{path.name} is a symlink to {target}, outside {folder}")
    sizes = wav_data_sizes(path)
    if sizes is not None and sizes[0] > sizes[1]:
        declared, held = sizes
        notes.append(
            f"the wav header declares {declared} bytes of audio but the file holds {held} after it "
            "(cut short, or a false size): scored on what is there"
        )
    return notes
