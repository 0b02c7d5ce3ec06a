"""Drives an engine through one round: offers the requests, times every chunk.

The runner talks to the engine only through its public interface
(`generate`, `stats`, `fault`, `sample_rate`); a failed request
(`RequestFailed`, or any error raised for that request alone) becomes a
record with its error, while `EngineError` (the engine as a whole stopped)
aborts the round. A request failure is checked against `engine.fault()`,
as `omni synth` does: a dead or hung engine fails every request after a
long wait, and the pass ends at the first one instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from omnicli.benchmark.loadgen import LoadShape, drive
from omnicli.benchmark.metrics import RequestRecord
from omnicli.engine.request import EngineError, EngineStats, RequestFailed, TTSRequest


@dataclass
class Prompt:
    """One request to offer, with the utterance id it reports under."""

    utt: str
    request: TTSRequest
    reference: str | None = None  # reference audio path, for retained-audio metadata


@dataclass
class RoundResult:
    records: list[RequestRecord]
    stats: EngineStats = field(default_factory=EngineStats)  # engine counters during the round
    complete: bool = True  # False when a stop cut it short (then `records` holds what finished)


async def measure_request(engine: Any, prompt: Prompt, request_id: str, keep_pcm: bool = False) -> RequestRecord:
    """Submits one request and records when each chunk arrived and how big it was."""
    request = dataclasses.replace(prompt.request, request_id=request_id)
    record = RequestRecord(
        utt=prompt.utt,
        request_id=request_id,
        start=0.0,
        end=0.0,
        sample_rate=int(engine.sample_rate),
        text=request.text,
        reference=prompt.reference,
    )
    pieces: list[np.ndarray] = []
    record.start = time.perf_counter()
    try:
        async for chunk in engine.generate(request):
            # The engine stamps delivery time; fall back to now if it did not.
            t = chunk.t if chunk.t > 0 else time.perf_counter()
            record.chunk_times.append(t)
            record.chunk_samples.append(chunk.num_samples)
            if keep_pcm and chunk.num_samples:
                pieces.append(chunk.pcm)
            if chunk.info is not None:
                record.ref_cache = chunk.info.ref_cache
                record.finish_reason = chunk.info.finish_reason
                record.prompt_tokens, record.output_tokens = chunk.info.prompt_tokens, chunk.info.talker_tokens
        record.end = record.chunk_times[-1] if record.chunk_times else time.perf_counter()
    except RequestFailed as exc:
        record.end = time.perf_counter()
        record.error = exc.reason or str(exc)
        record.ref_cache = exc.info.ref_cache
    except (EngineError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a bad request must not end the benchmark: count it failed
        record.end = time.perf_counter()
        record.error = f"{type(exc).__name__}: {exc}"
    if record.error is not None and (fault := engine.fault()) is not None:
        raise EngineError(fault)  # not this request's failure: the engine can serve no more
    if keep_pcm:
        record.pcm = _join(pieces)
    return record


def _join(pieces: list[np.ndarray]) -> np.ndarray:
    if not pieces:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(pieces, axis=0).astype(np.float32, copy=False)


async def run_round(
    engine: Any,
    prompts: Sequence[Prompt],
    shape: LoadShape,
    *,
    id_prefix: str,
    keep_pcm: bool = False,
    on_done: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 0.0,
) -> RoundResult:
    """Offers every prompt once following `shape`; records come back in submission order.

    Once `stop` is set nothing more is submitted and requests in flight get
    `grace_s` to finish (see `loadgen.drive`); the result is then incomplete.
    """
    records: list[RequestRecord] = []
    before = engine.stats()

    async def send(index: int) -> None:
        record = await measure_request(engine, prompts[index], f"{id_prefix}-{index}", keep_pcm)
        records.append(record)
        if on_done is not None:
            on_done(record)

    complete = await drive(range(len(prompts)), send, shape, stop=stop, grace_s=grace_s)
    stats = engine.stats().minus(before)
    records.sort(key=lambda r: r.start)
    return RoundResult(records=records, stats=stats, complete=complete)
