"""Generated audio as every eval scorer reads it: bounded in length, with notes on what is odd.

A clip is read from its file's start, at most `MAX_CLIP_SECONDS` of it (plus
a margin the resampler needs), so memory per clip is bounded whatever the
file holds; `omnicli.audio.load_audio` refuses an implausible sample rate or
length from the header before anything is read or resampled. What the
scores cannot show is said in `notes`: a clip scored on its first
`MAX_CLIP_SECONDS`, a wav whose header declares more audio than the file
holds, a symlink leading out of the folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from omnicli.audio import load_audio, resample, to_mono, wav_data_sizes
from omnicli.evaluation.asr.base import SAMPLE_RATE

MAX_CLIP_SECONDS = 60.0  # longer clips are scored on their first 60 s (docs/eval.md)
_MARGIN_S = 1.0  # read past the cut, so the resampled clip is the same as from the whole file


@dataclass
class Clip:
    pcm: np.ndarray  # 16 kHz mono float32, at most the `max_seconds` asked for
    duration_s: float  # of the whole file, from its header
    truncated: bool = False  # pcm holds only the file's first `max_seconds`
    notes: list[str] = field(default_factory=list)


def load_clip(path: Path, folder: Path, *, max_seconds: float = MAX_CLIP_SECONDS) -> Clip:
    """Reads `path` (a file of `folder`) for scoring; raises AudioError when it cannot be used."""
    import soundfile as sf

    notes = _file_notes(path, folder)
    pcm, sr = load_audio(path, max_seconds=max_seconds + _MARGIN_S)
    duration = sf.info(str(path)).frames / sr
    clip = resample(to_mono(pcm), sr, SAMPLE_RATE)
    limit = int(max_seconds * SAMPLE_RATE)
    truncated = duration > max_seconds and clip.shape[0] > limit
    if truncated:
        clip = clip[:limit]
        notes.append(f"scored on the first {max_seconds:g} s of {duration:.1f} s")
    return Clip(clip, duration, truncated, notes)


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
