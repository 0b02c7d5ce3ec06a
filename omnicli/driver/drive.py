"""The one request driver: prompts -> engine -> one typed record per request.

`omni synth` (plan -> drive -> sink) and `omni bench` (shapes -> drive ->
metrics) both run their requests through `drive`: a closed loop with N in
flight or open-loop arrival times (`LoadShape`), the same timing of every
chunk, the same stop rule and the same handling of failures:

- a request that fails (`RequestFailed`, a bad input, any error raised for
  it alone) becomes a record with its error; the others go on;
- `EngineDead` (the engine as a whole stopped) ends the drive at once:
  `engine_error` says why and the requests in flight are left pending, as
  they were not at fault;
- once `stop` is set (Ctrl-C) nothing more is submitted and requests in
  flight get `grace_s` to finish; those still running then, and those that
  fail meanwhile (a Ctrl-C also reaches vLLM's process), are left pending;
- an error raised by `on_record` (the caller's sink: results that cannot be
  written) cancels the rest and propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from omnicli.driver.inputs import InputError
from omnicli.driver.load import LoadShape, offer
from omnicli.driver.records import Prompt, RequestRecord
from omnicli.engine.request import EngineError, EngineStats, RequestFailed

STOP_GRACE_S = 5.0  # after a stop (first Ctrl-C), requests in flight may finish for this long


@dataclass
class DriveResult:
    records: list[RequestRecord] = field(default_factory=list)  # finished requests, in completion order
    left_pending: list[str] = field(default_factory=list)  # utts cut off by a stop or an engine failure
    complete: bool = True  # every prompt finished
    engine_error: str | None = None  # why the engine stopped serving, if it did
    stats: EngineStats = field(default_factory=EngineStats)  # engine counters during the drive
    wall_seconds: float = 0.0


async def run_request(engine: Any, prompt: Prompt, request_id: str, keep_pcm: bool = False) -> RequestRecord:
    """Submits one prompt and records when each chunk arrived and how big it was.

    Raises `EngineError` (the engine as a whole stopped); every other
    failure is this request's and ends up in `record.error`.
    """
    record = RequestRecord(
        utt=prompt.utt, request_id=request_id, start=time.perf_counter(), end=0.0,
        sample_rate=int(engine.sample_rate), text=prompt.text, reference=prompt.reference, prompt=prompt,
    )
    try:
        request = prompt.build(request_id)
    except InputError as exc:
        record.end, record.error, record.rejected = record.start, str(exc), True
        return record
    record.text = request.text
    pieces: list[np.ndarray] = []
    record.start = time.perf_counter()
    try:
        async for chunk in engine.generate(request):
            record.chunk_times.append(chunk.t)
            record.chunk_samples.append(chunk.num_samples)
            if keep_pcm and chunk.num_samples:
                pieces.append(chunk.pcm)
            if chunk.info is not None:
                record.info = chunk.info
                record.ref_cache = chunk.info.ref_cache
                record.finish_reason = chunk.info.finish_reason
        record.end = record.chunk_times[-1] if record.chunk_times else time.perf_counter()
    except RequestFailed as exc:
        record.end = time.perf_counter()
        record.error = exc.reason or str(exc)
        record.info, record.ref_cache = exc.info, exc.info.ref_cache
    except (EngineError, asyncio.CancelledError):
        raise
    except Exception as exc:
        record.end = time.perf_counter()
        record.error = f"{type(exc).__name__}: {exc}"
    if keep_pcm:
        record.pcm = np.concatenate(pieces, axis=0).astype(np.float32, copy=False) if pieces else np.zeros(0, np.float32)
    return record


async def drive(
    engine: Any,
    prompts: Sequence[Prompt],
    shape: LoadShape,
    *,
    id_prefix: str | None = None,
    keep_pcm: bool = False,
    on_record: Callable[[RequestRecord], None] | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = STOP_GRACE_S,
) -> DriveResult:
    """Offers every prompt once following `shape` (see the module doc for failures and stops).

    Request ids are `{id_prefix}-{index}`, or the prompt's utt without a prefix.
    """
    result = DriveResult()
    in_flight: dict[int, str] = {}
    before = engine.stats()
    t0 = time.perf_counter()
    arrivals = t0 + shape.offsets(len(prompts))  # when `offer` hands each prompt over (for queue times)

    async def send(index: int) -> None:
        prompt = prompts[index]
        in_flight[index] = prompt.utt
        record = await run_request(engine, prompt, f"{id_prefix}-{index}" if id_prefix else prompt.utt, keep_pcm)
        record.arrival = min(float(arrivals[index]), record.start)
        if record.error is not None and stop is not None and stop.is_set() and not record.rejected:
            return  # failed while stopping: not this request's fault; left pending
        del in_flight[index]
        result.records.append(record)
        if on_record is not None:
            on_record(record)

    try:
        result.complete = await offer(range(len(prompts)), send, shape, stop=stop, grace_s=grace_s)
    except EngineError as exc:
        result.complete = False
        result.engine_error = getattr(exc, "reason", None) or str(exc)
    finally:
        result.left_pending = [in_flight[i] for i in sorted(in_flight)]
        result.wall_seconds = time.perf_counter() - t0
        result.stats = engine.stats().minus(before)
    result.complete = result.complete and not result.left_pending
    return result
