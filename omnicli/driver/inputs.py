"""Manifest rows -> engine requests (loads and checks the reference audio)."""

from __future__ import annotations

from omnicli.audio import AudioError, load_audio
from omnicli.engine.request import TTSRequest
from omnicli.manifest import ManifestRow

# Every family uses at most the first 20 s of a reference; reading a little more keeps a long
# file's cost bounded without changing what the codec sees.
MAX_REFERENCE_SECONDS = 60.0


class InputError(ValueError):
    """A row that cannot become a request; the message names file, line and reason."""


def request_from_row(row: ManifestRow, *, max_new_tokens: int | None = None, seed: int | None = None) -> TTSRequest:
    """Builds the request for one manifest row; raises InputError for a bad reference."""
    ref_audio = ref_sr = None
    if row.prompt_wav is not None:
        try:
            ref_audio, ref_sr = load_audio(row.prompt_wav, max_seconds=MAX_REFERENCE_SECONDS)
        except AudioError as exc:
            raise InputError(f"{row.where}: reference audio: {exc}") from None
    return TTSRequest(
        request_id=row.utt,
        text=row.text,
        ref_audio=ref_audio,
        ref_sample_rate=ref_sr,
        ref_text=row.prompt_text,
        max_new_tokens=max_new_tokens,
        seed=seed,
        voice=row.voice or None,
        instruct=row.instruct or None,
    )
