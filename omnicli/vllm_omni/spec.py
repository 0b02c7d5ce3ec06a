"""One spec per vLLM-Omni family: everything engine.py, overlay.py and the request code choose by family.

The engine, the overlay and the request rules read a family's `OmniFamilySpec`
instead of comparing its name. Importing this module imports neither vLLM-Omni
nor torch, nor the family's request module: the request builder and the
start check are `"module:callable"` strings, resolved when an engine starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _resolve(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class OmniFamilySpec:
    """What differs between the vLLM-Omni families, as data."""

    name: str  # the omni family name (a profile's `model`)
    deploy_yaml: str  # vLLM-Omni's packaged deploy file the overlay inherits by default
    sample_rate: int  # the codec's output rate
    channels: int
    # "module:callable"(ckpt, codec, defaults, options, stage_configs) -> a builder with .build(TTSRequest)
    request_builder: str
    # "module:callable"(ckpt, options), run before any stage starts (raises a UsageError), or None
    start_check: str | None = None
    length_end_is_audio: bool = False  # a talker that stops at its budget still gave valid audio
    no_audio_error: str | None = None  # a finished request with no samples fails with this text
    codec_backend_in_hf_overrides: bool = False  # the codec's attention backend is an hf_overrides key
    codec_ring_caches: bool = False  # the codec keeps ring caches (codec.codec_ring_headroom is read)

    def check_startable(self, ckpt: Path, options: Mapping[str, Any] | None) -> None:
        """Refusals due before any stage starts (e.g. a checkpoint's own code without consent)."""
        if self.start_check is not None:
            _resolve(self.start_check)(ckpt, options)

    def make_builder(self, ckpt: Path, codec: Path | None, defaults: list, options: Mapping[str, Any] | None,
                     stage_configs: Sequence[Any] = ()) -> Any:
        """The family's request builder for one checkpoint (runs once, at engine start).

        `stage_configs`: the resolved stage configs of the running pipeline (where the
        deploy config's per-stage settings, such as Qwen3-TTS's codec budgets, are read)."""
        return _resolve(self.request_builder)(ckpt, codec, defaults, options, stage_configs)


QWEN3_TTS = OmniFamilySpec(
    name="qwen3-tts",
    deploy_yaml="qwen3_tts.yaml",
    sample_rate=24000,
    channels=1,
    request_builder="omnicli.vllm_omni.requests:qwen3_builder",
)
MOSS_TTS_LOCAL = OmniFamilySpec(
    name="moss-tts-local",
    deploy_yaml="moss_tts_local.yaml",
    sample_rate=48000,
    channels=2,
    request_builder="omnicli.vllm_omni.moss:moss_builder",
    start_check="omnicli.vllm_omni.moss:check_trusted",
    length_end_is_audio=True,  # MOSS's adapter keeps the audio of a length end
    no_audio_error="MOSS-TTS Local produced no audio output",  # its sampled stop gate can end before frame 1
    codec_backend_in_hf_overrides=True,
    codec_ring_caches=True,
)
OMNI_FAMILIES: dict[str, OmniFamilySpec] = {s.name: s for s in (QWEN3_TTS, MOSS_TTS_LOCAL)}


def omni_family(name: str) -> OmniFamilySpec:
    """The spec of vLLM-Omni family `name`; ValueError naming the known ones otherwise."""
    spec = OMNI_FAMILIES.get(name)
    if spec is None:
        raise ValueError(f"{name} is not a vLLM-Omni family (known: {', '.join(OMNI_FAMILIES)})")
    return spec
