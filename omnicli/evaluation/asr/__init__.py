"""ASR backends for eval-wer, chosen with `--asr BACKEND[:MODEL]`, all offline.

    openai-whisper[:large-v3 | NAME | /path/model.pt]   (default)
    faster-whisper[:large-v3 | NAME | /path/ct2-folder | tiny.en-bundled]
    transformers[:openai/whisper-large-v3 | NAME | /path/folder]
    funasr[:paraformer-zh | /path/folder]               (Chinese)

Weights must already be on this machine; a missing model is an AsrSetupError
that names where it was looked for. Nothing is ever downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from omnicli.evaluation.asr import locate
from omnicli.evaluation.asr.base import (
    SAMPLE_RATE,
    WINDOW_S,
    WINDOW_SAMPLES,
    AsrBackend,
    AsrError,
    AsrSetupError,
    resolve_torch_device,
)

DEFAULT_MODELS = {
    "openai-whisper": "large-v3",
    "faster-whisper": "large-v3",
    "transformers": "openai/whisper-large-v3",
    "funasr": "paraformer-zh",
}
BACKENDS = tuple(DEFAULT_MODELS)

__all__ = [
    "AsrBackend", "AsrError", "AsrSetupError", "AsrSpec", "BACKENDS", "DEFAULT_MODELS",
    "SAMPLE_RATE", "WINDOW_S", "WINDOW_SAMPLES", "default_spec", "load_backend",
]


@dataclass(frozen=True)
class AsrSpec:
    backend: str
    model: str

    @classmethod
    def parse(cls, text: str) -> AsrSpec:
        """`BACKEND` or `BACKEND:MODEL`; only the first ':' splits, so MODEL may be any path."""
        backend, sep, model = text.strip().partition(":")
        backend = backend.strip().lower()
        if backend not in DEFAULT_MODELS:
            raise AsrSetupError(f"unknown ASR backend {backend!r} in --asr {text!r} (expected one of {', '.join(BACKENDS)})")
        model = model.strip()
        if sep and not model:
            raise AsrSetupError(f"--asr {text!r} names no model after ':'")
        return cls(backend, model or DEFAULT_MODELS[backend])

    def __str__(self) -> str:
        return f"{self.backend}:{self.model}"


def default_spec(lang: str) -> AsrSpec:
    """seed-tts-eval's choice: Whisper large-v3 for English, Paraformer-zh for
    Chinese. Without funasr or its model, Chinese is an AsrSetupError rather
    than a silent switch to Whisper (whose CER is not comparable): the user
    picks Whisper explicitly with --asr."""
    if lang == "zh":
        from omnicli.evaluation.asr.paraformer import funasr_available

        hint = (
            "; to score Chinese with Whisper instead (CER not comparable with published Seed-TTS-eval tables), "
            "choose it explicitly: --asr openai-whisper:large-v3"
        )
        if not funasr_available():
            raise AsrSetupError(
                "Chinese is scored with Paraformer-zh, as seed-tts-eval does, but funasr is not installed "
                "(pip install 'omnicli[funasr]', then place the paraformer-zh model, see docs/eval-wer.md)" + hint
            )
        try:
            locate.locate_paraformer("paraformer-zh")
        except AsrSetupError as exc:
            raise AsrSetupError(f"Chinese is scored with Paraformer-zh, as seed-tts-eval does: {exc}{hint}") from None
        return AsrSpec("funasr", "paraformer-zh")
    return AsrSpec("openai-whisper", DEFAULT_MODELS["openai-whisper"])


def load_backend(
    spec: AsrSpec, *, lang: str, device: str = "auto", max_new_tokens: int | None = None
) -> AsrBackend:
    """Locates the weights (AsrSetupError when absent) and loads the backend."""
    locate.force_offline()
    if spec.backend == "faster-whisper":
        from omnicli.evaluation.asr.whisper_ctranslate2 import FasterWhisperBackend

        path = locate.locate_ctranslate2(spec.model)
        return FasterWhisperBackend(model=str(path), language=lang, device=device, max_new_tokens=max_new_tokens)
    if spec.backend == "openai-whisper":
        from omnicli.evaluation.asr.whisper_openai import OpenAIWhisperBackend

        path = locate.locate_openai_whisper(spec.model)
        return OpenAIWhisperBackend(
            model=str(path), language=lang, device=resolve_torch_device(device), max_new_tokens=max_new_tokens
        )
    if spec.backend == "transformers":
        from omnicli.evaluation.asr.whisper_transformers import TransformersWhisperBackend

        path = locate.locate_transformers(spec.model)
        return TransformersWhisperBackend(
            model=str(path), language=lang, device=resolve_torch_device(device), max_new_tokens=max_new_tokens
        )
    from omnicli.evaluation.asr.paraformer import ParaformerBackend, funasr_available

    if not funasr_available():
        raise AsrSetupError("the funasr backend needs the funasr package (pip install funasr), which is not installed")
    path = locate.locate_paraformer(spec.model)
    return ParaformerBackend(model=str(path), language=lang, device=resolve_torch_device(device))
