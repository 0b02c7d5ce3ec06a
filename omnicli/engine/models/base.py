"""The model-family adapter: everything the engine needs to know about a model.

An adapter says how to build the talker prompt, how talker tokens map to
codec codes, when generation stops, and gives the codec that turns codes
into PCM. The native families (omni-tiny, orpheus, neutts-air) implement
this class and register in `omnicli.engine.models.registrations`; the
engine never looks inside a model otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the codec pulls in torch; the adapter's users need not
    from omnicli.engine.models.codec import StreamingCodec
    from omnicli.engine.windowed import WindowCodec


class ModelAdapter(ABC):
    name: str
    sample_rate: int
    channels: int = 1
    frame_rate: float
    num_codebooks: int
    max_text_bytes: int

    talker_path: Path  # a Hugging Face style folder vLLM can load
    codec: StreamingCodec | WindowCodec  # ring-cache streaming codec, or one decoded in stateless windows
    uses_reference: bool = True  # False: the prompt ignores reference audio (it is not encoded)
    uses_voice: bool = False  # True: a request's named `voice` goes into the prompt
    ref_sample_rate: int | None = None  # rate the reference encoder takes; None: sample_rate
    max_ref_samples: int  # longest reference audio the encoder takes (set by each adapter)
    # The family's own codec chunk sizes (first chunks, steady size), used when the profile sets none of
    # the geometry keys (omnicli.engine.chunker.stream_geometry); None: the schema's defaults.
    stream_geometry: tuple[tuple[int, ...], int] | None = None

    @abstractmethod
    def build_prompt(
        self, text: str, ref_text: str, ref_codes: np.ndarray | None, voice: str | None = None
    ) -> list[int]:
        """Token ids that prompt the talker for `text` in the reference's voice (or the named
        `voice`, for a family that `uses_voice`; the others ignore it)."""

    @abstractmethod
    def allowed_token_ids(self) -> list[int]:
        """Token ids the talker may sample (the codec tokens)."""

    @abstractmethod
    def tokens_to_codes(self, token_ids: np.ndarray) -> np.ndarray:
        """Talker tokens of whole frames (len % num_codebooks == 0) -> codes (frames, K)."""

    @abstractmethod
    def target_tokens(self, text: str) -> int | None:
        """A duration stop rule: how many talker tokens `text` takes; None when a stop token ends it."""

    def stop_token_ids(self) -> list[int]:
        """Tokens that end generation (the family's end-of-speech); empty for a duration rule."""
        return []

    def keep_tokens(self, token_ids: list[int]) -> list[int]:
        """The generated tokens that carry codes (drops a trailing stop token)."""
        return token_ids

    @property
    def windowed(self) -> bool:
        """True: the codec decodes stateless windows (omnicli.engine.windowed), not ring caches."""
        from omnicli.engine.windowed import WindowCodec

        return isinstance(self.codec, WindowCodec)

    def sampling_overrides(self) -> dict[str, object]:
        """Talker sampling settings the family's model card prescribes (override the profile's)."""
        return {}

    def check_text(self, text: str) -> str | None:
        """Why `text` cannot be synthesised, or None."""
        size = len(text.encode("utf-8"))
        if size > self.max_text_bytes:
            return f"text is {size} bytes long; {self.name} accepts at most {self.max_text_bytes}"
        return None
