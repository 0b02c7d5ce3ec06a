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
from pathlib import Path

from omnicli.evaluation.asr import locate
from omnicli.evaluation.asr.base import (
    SAMPLE_RATE,
    WINDOW_S,
    WINDOW_SAMPLES,
    AsrBackend,
    AsrError,
    AsrSetupError,
)
from omnicli.lazy import load_ref

__all__ = [
    "AsrBackend", "AsrError", "AsrSetupError", "AsrSpec", "AsrBackendEntry",
    "SAMPLE_RATE", "WINDOW_S", "WINDOW_SAMPLES", "asr_backend_names", "default_spec", "get_asr_backend",
    "load_backend", "register_asr_backend",
]


@dataclass(frozen=True)
class AsrBackendEntry:
    """One ASR backend: adding one is a module with a `load` function plus one `register_asr_backend`."""

    name: str  # what `--asr NAME[:MODEL]` says
    default_model: str
    locate: str  # "module:callable(model) -> Path": finds the weights without loading them (AsrSetupError)
    load: str  # "module:callable(model, *, lang, device, max_new_tokens) -> AsrBackend": locates, then loads


_BACKENDS: dict[str, AsrBackendEntry] = {}


def register_asr_backend(entry: AsrBackendEntry) -> None:
    if entry.name in _BACKENDS:
        raise ValueError(f"ASR backend {entry.name!r} is registered twice")
    _BACKENDS[entry.name] = entry


def asr_backend_names() -> list[str]:
    return list(_BACKENDS)


def get_asr_backend(name: str) -> AsrBackendEntry:
    if name not in _BACKENDS:
        raise AsrSetupError(f"unknown ASR backend {name!r} (expected one of {', '.join(_BACKENDS)})")
    return _BACKENDS[name]


_LOCATE = "omnicli.evaluation.asr.locate"
register_asr_backend(AsrBackendEntry("openai-whisper", "large-v3", f"{_LOCATE}:locate_openai_whisper",
                                     "omnicli.evaluation.asr.whisper_openai:load"))
register_asr_backend(AsrBackendEntry("faster-whisper", "large-v3", f"{_LOCATE}:locate_ctranslate2",
                                     "omnicli.evaluation.asr.whisper_ctranslate2:load"))
register_asr_backend(AsrBackendEntry("transformers", "openai/whisper-large-v3", f"{_LOCATE}:locate_transformers",
                                     "omnicli.evaluation.asr.whisper_transformers:load"))
register_asr_backend(AsrBackendEntry("funasr", "paraformer-zh", f"{_LOCATE}:locate_paraformer",
                                     "omnicli.evaluation.asr.paraformer:load"))


@dataclass(frozen=True)
class AsrSpec:
    backend: str
    model: str

    @classmethod
    def parse(cls, text: str) -> AsrSpec:
        """`BACKEND` or `BACKEND:MODEL`; only the first ':' splits, so MODEL may be any path."""
        backend, sep, model = text.strip().partition(":")
        backend = backend.strip().lower()
        if backend not in _BACKENDS:
            raise AsrSetupError(
                f"unknown ASR backend {backend!r} in --asr {text!r} (expected one of {', '.join(_BACKENDS)})")
        model = model.strip()
        if sep and not model:
            raise AsrSetupError(f"--asr {text!r} names no model after ':'")
        return cls(backend, model or _BACKENDS[backend].default_model)

    def locate(self) -> Path:
        """The weights' path, without loading them (AsrSetupError when absent)."""
        return load_ref(get_asr_backend(self.backend).locate)(self.model)

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
    return AsrSpec("openai-whisper", _BACKENDS["openai-whisper"].default_model)


def load_backend(
    spec: AsrSpec, *, lang: str, device: str = "auto", max_new_tokens: int | None = None
) -> AsrBackend:
    """Locates the weights (AsrSetupError when absent) and loads the backend."""
    locate.force_offline()
    load = load_ref(get_asr_backend(spec.backend).load)
    return load(spec.model, lang=lang, device=device, max_new_tokens=max_new_tokens)
