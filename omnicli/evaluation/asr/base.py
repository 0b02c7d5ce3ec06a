"""What every ASR backend offers, and the errors they raise."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from omnicli.errors import UsageError

SAMPLE_RATE = 16_000  # every backend gets 16 kHz mono float32 in [-1, 1]
WINDOW_S = 30.0  # Whisper's single decoding window
WINDOW_SAMPLES = int(SAMPLE_RATE * WINDOW_S)

# How seed-tts-eval decodes, which every Whisper backend matches (docs/eval-wer.md).
WHISPER_GREEDY_SETTINGS = {
    "search": "greedy",
    "temperature": 0.0,
    "temperature_fallback": False,
    "beam_size": 1,
    "best_of": 1,
    "condition_on_previous_text": False,
    "without_timestamps": True,
    "window_s": WINDOW_S,
}


class AsrError(RuntimeError):
    """ASR could not be set up or run (a broken checkpoint, a runtime failure)."""


class AsrSetupError(AsrError, UsageError):
    """The request itself cannot be met: unknown backend, model not on this
    machine, package not installed, CUDA asked for but absent. A usage error."""


class AsrBackend(ABC):
    """A loaded ASR model that turns 16 kHz mono clips into text.

    `truncates_to_window`: the caller cuts clips to `WINDOW_S` seconds before
    `transcribe` (Whisper's single window, as seed-tts-eval's feature
    extractor does); False for backends that take any length.
    """

    backend: str = ""
    truncates_to_window: bool = True

    def __init__(self, *, model: str, language: str, device: str, max_new_tokens: int | None = None):
        self.model = model  # resolved path of the weights
        self.language = language
        self.device = device
        self.max_new_tokens = max_new_tokens

    @abstractmethod
    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        """One transcript per clip, in order. A whole-batch failure raises."""

    @abstractmethod
    def decoding_settings(self) -> dict:
        """How this backend decodes, recorded in the summary."""

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model,
            "language": self.language,
            "device": self.device,
            "decoding": self.decoding_settings(),
        }


def resolve_torch_device(device: str) -> str:
    """auto -> cuda when torch sees a GPU, else cpu; cuda without a GPU is an error."""
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise AsrSetupError("--device cuda was asked for but torch sees no CUDA GPU (use --device cpu or auto)")
    if device not in ("cpu", "cuda"):
        raise AsrSetupError(f"unknown device {device!r} (expected auto, cpu or cuda)")
    return device
