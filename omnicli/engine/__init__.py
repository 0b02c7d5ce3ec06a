"""The multi-stage TTS engine (stage 0 talker on vLLM, stage 1 streaming codec).

`Engine` is imported on first use: it pulls in torch and vLLM, which a
caller that only needs the request and result types should not pay for.
"""

from typing import TYPE_CHECKING

from omnicli.engine.request import (
    AudioChunk,
    EngineDead,
    EngineError,
    EngineLike,
    EngineStats,
    RequestFailed,
    RequestInfo,
    TTSRequest,
)

if TYPE_CHECKING:
    from omnicli.engine.engine import Engine

__all__ = [
    "AudioChunk",
    "Engine",
    "EngineDead",
    "EngineError",
    "EngineLike",
    "EngineStats",
    "RequestFailed",
    "RequestInfo",
    "TTSRequest",
]


def __getattr__(name: str) -> object:
    if name == "Engine":
        from omnicli.engine.engine import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
