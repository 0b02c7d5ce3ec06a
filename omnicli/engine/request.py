"""What goes into the engine and what comes out of it.

These types are the whole contract between the toolkit and the engine:
the toolkit builds `TTSRequest`s, iterates `AudioChunk`s and reads the
`RequestInfo` carried by the last chunk. A failed request raises
`RequestFailed` after yielding whatever audio was already delivered; the
other requests go on. `EngineDead` says the engine as a whole stopped
(a stage died or hung, or it was closed): nothing more will come from it.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from omnicli.errors import EngineFailure

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

FinishReason = Literal["stop", "length"]
RefCache = Literal["hot", "cold", "none"]  # whether the reference's codes were cached


@dataclass
class TTSRequest:
    """One utterance to synthesize.

    `ref_audio` is float32 PCM of shape (samples,) or (samples, channels) at
    `ref_sample_rate`; the engine converts it to what the codec needs.
    `voice` names one of the model's built-in voices (Orpheus finetuned);
    it wins over the profile's `model_options.voice`. Families without
    named voices ignore it (the engine warns once).
    """

    request_id: str
    text: str
    ref_audio: np.ndarray | None = None
    ref_sample_rate: int | None = None
    ref_text: str = ""
    max_new_tokens: int | None = None  # talker token cap; None = profile default
    seed: int | None = None
    voice: str | None = None
    instruct: str | None = None  # a voice described in words (Qwen3-TTS VoiceDesign; JSONL `instruct`)
    language: str | None = None  # None = the profile's (model_options.language), else the model's auto


# What each caller-settable field of a `TTSRequest` takes (`--extra-body` sets them; a manifest row some):
# a wrong type must fail that request alone, never reach vLLM (a string seed kills its engine core's
# input thread). Seeds are vLLM's range (a torch.long); a token cap past 2**31 - 1 asks for nothing real.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TOKEN_CAP = 2**31 - 1
_TEXT_FIELDS = ("text", "ref_text")  # strings
_OPTIONAL_TEXT_FIELDS = ("voice", "instruct", "language")  # a string or None


def field_problem(name: str, value: object) -> str | None:
    """Why `value` cannot be the `TTSRequest` field `name` ("must be ..."), or None when it can."""
    if name in _TEXT_FIELDS:
        return None if isinstance(value, str) else "must be a string"
    if name in _OPTIONAL_TEXT_FIELDS:
        return None if value is None or isinstance(value, str) else "must be a string (or null)"
    whole = isinstance(value, int) and not isinstance(value, bool)
    if name == "seed":
        ok = value is None or (whole and INT64_MIN <= value <= INT64_MAX)  # type: ignore[operator]
        return None if ok else f"must be an integer from {INT64_MIN} to {INT64_MAX} (or null)"
    if name == "max_new_tokens":
        ok = value is None or (whole and 1 <= value <= MAX_TOKEN_CAP)  # type: ignore[operator]
        return None if ok else f"must be an integer from 1 to {MAX_TOKEN_CAP} (or null)"
    if name == "ref_sample_rate":  # stays in this process: numpy's integers too
        ok = value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) > 0)
        return None if ok else "must be a positive integer (or null)"
    return None


CHECKED_FIELDS = ("text", "ref_text", "voice", "instruct", "language", "seed", "max_new_tokens", "ref_sample_rate")


def request_problem(request: TTSRequest) -> str | None:
    """The first field of `request` an engine must not hand on (`field: must be ...; got ...`), or None."""
    for name in CHECKED_FIELDS:
        value = getattr(request, name, None)
        if (why := field_problem(name, value)) is not None:
            return f"{name} {why} (got {value!r:.80})"
    return None


@dataclass
class RequestInfo:
    """Per-request facts known when the request ends (carried by the last chunk)."""

    finish_reason: FinishReason = "stop"
    ref_cache: RefCache = "none"
    prompt_tokens: int = 0
    talker_tokens: int = 0
    codec_frames: int = 0
    submitted_at: float = 0.0  # perf_counter() when the engine accepted it
    # Talker token timings (vLLM's TTFT / TPOT / ITL): perf_counter() of the first
    # talker output, and of each talker output step (one step may carry several tokens).
    first_token_at: float | None = None
    token_times: list[float] = field(default_factory=list)
    hit_cap: bool = False  # the talker stopped at the request's max_new_tokens cap (finish_reason "length")
    stages: dict = field(default_factory=dict)  # per-stage figures of engines that report them (vLLM-Omni)


@dataclass
class AudioChunk:
    """A piece of PCM delivered to the caller.

    `pcm` is float32, shape (samples,) for mono or (samples, channels).
    `t` is `time.perf_counter()` when the chunk was handed to the caller.
    The last chunk of a request has `is_last=True` (it may hold no samples)
    and carries `info`.
    """

    pcm: np.ndarray
    is_last: bool
    t: float
    info: RequestInfo | None = None

    @property
    def num_samples(self) -> int:
        return int(self.pcm.shape[0])


class RequestFailed(RuntimeError):
    """A request ended with an error; other requests are unaffected."""

    def __init__(self, request_id: str, reason: str, info: RequestInfo | None = None):
        super().__init__(f"request {request_id}: {reason}")
        self.request_id = request_id
        self.reason = reason
        self.info = info or RequestInfo()


class EngineError(EngineFailure, RuntimeError):
    """The engine cannot start or has stopped working; no request can proceed."""


class EngineDead(EngineError):
    """The engine stopped while serving (a stage died or hung, or it was closed).

    Raised by `generate` for every request in flight and every later one;
    `reason` says why. A caller that gets it stops submitting: unlike
    `RequestFailed`, it is not the fault of the request it was raised for.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class EngineStats:
    """Counters the stages keep for benchmarks (monotonic; diff two snapshots)."""

    talker_tokens: int = 0
    talker_time_s: float = 0.0  # wall time the talker had requests in flight
    codec_steps: int = 0
    codec_rows: int = 0  # request-chunks executed (sum of batch sizes)
    codec_frames: int = 0
    codec_compute_s: float = 0.0
    coalescing_waits: int = 0
    coalescing_wait_ms: float = 0.0
    ref_hot: int = 0
    ref_cold: int = 0
    extra: dict = field(default_factory=dict)
    # Per-stage counters of engines with stage processes (vLLM-Omni: `talker_cpu_s`, `codec_cpu_s`, ...):
    # counters like the fields above, differenced and summed key by key.
    stages: dict[str, float] = field(default_factory=dict)

    def minus(self, earlier: EngineStats) -> EngineStats:
        """Counter differences; `extra` holds facts, not counters: this (the later) snapshot's are kept."""
        out = EngineStats(extra=dict(self.extra),
                          stages={k: v - earlier.stages.get(k, 0) for k, v in self.stages.items()})
        for f in dataclasses.fields(self):
            if f.name not in ("extra", "stages"):
                setattr(out, f.name, getattr(self, f.name) - getattr(earlier, f.name))
        return out

    def plus(self, other: EngineStats) -> EngineStats:
        """Counters summed (rounds of one engine, or engines side by side); facts in `extra` merged."""
        keys = dict.fromkeys([*self.stages, *other.stages])
        out = EngineStats(extra={**self.extra, **other.extra},
                          stages={k: self.stages.get(k, 0) + other.stages.get(k, 0) for k in keys})
        for f in dataclasses.fields(self):
            if f.name not in ("extra", "stages"):
                setattr(out, f.name, getattr(self, f.name) + getattr(other, f.name))
        return out

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if not self.stages:  # an engine without stage processes writes the counters it always wrote
            del d["stages"]
        d["mean_codec_batch_size"] = self.codec_rows / self.codec_steps if self.codec_steps else 0.0
        d["talker_tokens_per_s"] = self.talker_tokens / self.talker_time_s if self.talker_time_s else 0.0
        return d


class EngineLike(Protocol):
    """What the toolkit needs from an engine: `Engine` is one, each backend of
    `omnicli.engine.backends` gives one; unit tests use small fakes.

    `generate` yields AudioChunks and raises `RequestFailed` (that request)
    or `EngineDead` (all of them); `stats` returns monotonic counters.
    """

    model_name: str  # the family that runs (`model:` of the profile)
    device: str  # "cpu" | "cuda": where it runs
    resolved: ResolvedProfile  # the profile it was started from
    sample_rate: int
    channels: int
    startup_seconds: float  # how long `start` took

    def generate(self, request: TTSRequest) -> AsyncIterator[AudioChunk]: ...

    def stats(self) -> EngineStats: ...

    def write_run_files(self, run_dir: Path) -> list[Path]:
        """Writes what this engine adds to a run folder (the vLLM-Omni engine: the deploy overlay
        its profile became); returns the files written. The native engine adds none."""
        ...

    async def close(self) -> None: ...
