"""The multi-stage TTS engine (stage 0 talker on vLLM, stage 1 streaming codec)."""

from omnicli.engine.engine import Engine
from omnicli.engine.request import AudioChunk, EngineError, EngineStats, RequestFailed, RequestInfo, TTSRequest

__all__ = ["AudioChunk", "Engine", "EngineError", "EngineStats", "RequestFailed", "RequestInfo", "TTSRequest"]
