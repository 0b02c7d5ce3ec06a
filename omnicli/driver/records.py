"""What the request driver takes and gives: `Prompt` in, `RequestRecord` out.

A record holds what one request did: submission time, each chunk's arrival
and size, its audio (when kept) and its `Outcome` (one field: ok, failed,
rejected before it became a request, or left pending by a stop). The per-request timing
formulas (docs/metrics.md: audio_ttfp, e2el, audio_rtf, audio_underrun) live
here beside it; the aggregates over many records are in
`omnicli.benchmark.metrics`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from omnicli.engine.request import FinishReason, RefCache, RequestInfo, TTSRequest
from omnicli.manifest import ManifestRow


class Outcome(str, Enum):
    """What happened to one request (the values are what a results row's status could hold)."""

    OK = "ok"
    FAILED = "failed"  # the engine or the request failed it: `error` says why
    REJECTED = "rejected"  # its input never became a request (a bad reference): `error` says why
    LEFT_PENDING = "left_pending"  # cut off by a stop: not its fault, a resume retries it

    def __str__(self) -> str:
        return self.value


@dataclass
class Prompt:
    """One request to offer, under the utterance id it reports as.

    `request` is built up front (bench: references loaded before any
    timing), or `load` builds it when the driver submits it (synth: one
    reference in memory per request in flight); `load` may raise
    `omnicli.driver.inputs.InputError`, which fails that prompt alone.
    `row` is the manifest row it came from (synth and bench), handed back in
    the record for the results row and retained-audio metadata; the driver
    never reads it.
    """

    utt: str
    request: TTSRequest | None = None
    reference: str | None = None  # reference audio path, for retained-audio metadata
    load: Callable[[], TTSRequest] | None = None
    text: str = ""
    row: ManifestRow | None = None

    def build(self, request_id: str) -> TTSRequest:
        if self.request is not None:
            request = self.request
        elif self.load is not None:
            request = self.load()
        else:
            raise ValueError(f"prompt {self.utt!r} has neither a request nor a way to load one")
        return dataclasses.replace(request, request_id=request_id)


def audio_ttfp(start: float, chunk_times: Sequence[float], chunk_samples: Sequence[int]) -> float | None:
    """First non-empty chunk's delivery time minus submission; None without audio."""
    for t, n in zip(chunk_times, chunk_samples):
        if n > 0:
            return t - start
    return None


def audio_duration(num_samples: int, sample_rate: int) -> float:
    """Seconds of audio (samples per channel / sample rate)."""
    return num_samples / sample_rate if sample_rate > 0 else 0.0


def audio_rtf(e2el: float, duration: float) -> float | None:
    """e2el / audio duration; undefined (None) for empty audio."""
    return e2el / duration if duration > 0 else None


def audio_underrun(chunk_times: Sequence[float], chunk_durations: Sequence[float]) -> float:
    """Total playback gap once playback has started (docs/metrics.md, cursor rule).

    Playback starts with the first chunk holding audio; chunks without audio
    (an empty terminal message) have nothing to play and are skipped.
    """
    gap = 0.0
    cursor: float | None = None
    for t, d in zip(chunk_times, chunk_durations):
        if d <= 0:
            continue
        if cursor is None:
            cursor = t + d
        elif t > cursor:
            gap += t - cursor
            cursor = t + d
        else:
            cursor += d
    return gap


@dataclass
class RequestRecord:
    """What one request did: submission time, each chunk's arrival and size, outcome."""

    utt: str
    request_id: str
    start: float  # perf_counter() at submission
    end: float  # perf_counter() of the last chunk, or when the failure surfaced
    sample_rate: int
    chunk_times: list[float] = field(default_factory=list)
    chunk_samples: list[int] = field(default_factory=list)
    error: str | None = None  # why it did not end ok (the message of `outcome`)
    ref_cache: RefCache = "none"  # the engine's RequestInfo.ref_cache
    finish_reason: FinishReason | None = None  # the engine's RequestInfo.finish_reason, of an ok request
    text: str = ""
    reference: str | None = None
    pcm: np.ndarray | None = None  # kept only when audio is saved or judged
    info: RequestInfo | None = None  # the engine's facts (also of a failed request)
    prompt: Prompt | None = None  # what was offered, handed back to the caller
    arrival: float | None = None  # perf_counter() its load shape offered it at (before waiting for a slot)
    outcome: Outcome = Outcome.OK  # FAILED when built with an `error` and no outcome

    def __post_init__(self) -> None:
        if self.error is not None and self.outcome is Outcome.OK:
            self.outcome = Outcome.FAILED

    def end_with(self, outcome: Outcome, error: str | None = None) -> None:
        """Sets the outcome and its message together (the one way `drive` ends a record badly)."""
        self.outcome, self.error = outcome, error

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def rejected(self) -> bool:
        """Its input never became a request (`error` says why): nothing to judge or keep."""
        return self.outcome is Outcome.REJECTED

    @property
    def prompt_tokens(self) -> int:
        """Talker prompt length (what vLLM counts as input tokens)."""
        return self.info.prompt_tokens if self.info is not None else 0

    @property
    def output_tokens(self) -> int:
        """Talker tokens generated (what vLLM counts as output tokens)."""
        return self.info.talker_tokens if self.info is not None else 0

    @property
    def ttft(self) -> float | None:
        """vLLM's time to first token, of the talker: its first output - submission; None without one."""
        first = self.info.first_token_at if self.info is not None else None
        return None if first is None else first - self.start

    @property
    def itl(self) -> list[float]:
        """vLLM's inter-token latencies: seconds between consecutive talker output steps."""
        times = self.info.token_times if self.info is not None else []
        return [b - a for a, b in zip(times, times[1:])]

    @property
    def tpot(self) -> float | None:
        """vLLM's time per output token after the first: (last - first talker output) / (tokens - 1);
        None for fewer than two tokens."""
        info = self.info
        if info is None or info.first_token_at is None or not info.token_times or info.talker_tokens < 2:
            return None
        return (info.token_times[-1] - info.first_token_at) / (info.talker_tokens - 1)

    @property
    def queue_time(self) -> float:
        """vLLM's client queue time: submission - the moment the load shape offered it (waiting for a slot)."""
        return max(0.0, self.start - self.arrival) if self.arrival is not None else 0.0

    @property
    def num_samples(self) -> int:
        return int(sum(self.chunk_samples))

    @property
    def nonempty(self) -> bool:
        return self.ok and self.num_samples > 0

    @property
    def audio_duration(self) -> float:
        return audio_duration(self.num_samples, self.sample_rate)

    @property
    def audio_ttfp(self) -> float | None:
        return audio_ttfp(self.start, self.chunk_times, self.chunk_samples)

    @property
    def e2el(self) -> float:
        return self.end - self.start

    @property
    def audio_rtf(self) -> float | None:
        return audio_rtf(self.e2el, self.audio_duration)

    @property
    def e2el_to_last_chunk(self) -> float | None:
        """Last chunk's delivery minus submission, also of a request that failed after some audio
        (`e2el` then runs to the failure); None without chunks. The e2el of a results row."""
        return self.chunk_times[-1] - self.start if self.chunk_times else None

    @property
    def rtf_to_last_chunk(self) -> float | None:
        """`e2el_to_last_chunk` / audio duration: the rtf of a results row (None without either)."""
        e2el = self.e2el_to_last_chunk
        return audio_rtf(e2el, self.audio_duration) if e2el else None

    @property
    def audio_underrun(self) -> float:
        durations = [audio_duration(n, self.sample_rate) for n in self.chunk_samples]
        return audio_underrun(self.chunk_times, durations)


