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

Prompts are taken from their iterable as they are admitted, and a record
is kept past its `on_record` only with `keep_records` (bench computes its
figures from them; synth writes each one and lets it go), so a drive of a
million rows holds what is in flight, not what is done.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field

import numpy as np

from omnicli.driver.inputs import InputError
from omnicli.driver.load import LoadShape, offer
from omnicli.driver.records import Outcome, Prompt, RequestRecord
from omnicli.engine.request import EngineDead, EngineError, EngineLike, EngineStats, RequestFailed

STOP_GRACE_S = 5.0  # after a stop (first Ctrl-C), requests in flight may finish for this long


@dataclass
class DriveResult:
    # finished requests, in completion order (with keep_records)
    records: list[RequestRecord] = field(default_factory=list)
    left_pending: list[str] = field(default_factory=list)  # utts cut off by a stop or an engine failure
    complete: bool = True  # every prompt finished
    engine_error: EngineDead | None = None  # the engine stopped serving: its EngineDead (reason: why)
    stats: EngineStats = field(default_factory=EngineStats)  # engine counters during the drive
    wall_seconds: float = 0.0


class _Schedule:
    """Arrival times drawn as their prompts are sent (in order), none held for the rest."""

    def __init__(self, offsets: Iterator[float], t0: float):
        self.offsets, self.t0 = offsets, t0
        self.drawn = 0
        self.unsent: dict[int, float] = {}

    def at(self, index: int) -> float:
        while self.drawn <= index:
            self.unsent[self.drawn] = next(self.offsets)
            self.drawn += 1
        return self.t0 + self.unsent.pop(index)


async def run_request(engine: EngineLike, prompt: Prompt, request_id: str, keep_pcm: bool = False) -> RequestRecord:
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
        record.end = record.start
        record.end_with(Outcome.REJECTED, str(exc))
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
        record.end_with(Outcome.FAILED, exc.reason or str(exc))
        record.info, record.ref_cache = exc.info, exc.info.ref_cache
    except (EngineError, asyncio.CancelledError):
        raise
    except Exception as exc:
        record.end = time.perf_counter()
        record.end_with(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
    if keep_pcm:
        empty = np.zeros(0, np.float32)
        record.pcm = np.concatenate(pieces, axis=0).astype(np.float32, copy=False) if pieces else empty
    return record


async def drive(
    engine: EngineLike,
    prompts: Iterable[Prompt],
    shape: LoadShape,
    *,
    id_prefix: str | None = None,
    keep_pcm: bool = False,
    keep_records: bool = True,
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
    # The draws `offer` makes: when it hands each prompt over (for queue times).
    arrivals = _Schedule(shape.arrivals(len(prompts) if isinstance(prompts, Sized) else None), t0)

    async def send(numbered: tuple[int, Prompt]) -> None:
        index, prompt = numbered
        in_flight[index] = prompt.utt
        record = await run_request(engine, prompt, f"{id_prefix}-{index}" if id_prefix else prompt.utt, keep_pcm)
        record.arrival = min(arrivals.at(index), record.start)
        if record.outcome is Outcome.FAILED and stop is not None and stop.is_set():
            record.outcome = Outcome.LEFT_PENDING  # failed while stopping: not this request's fault
            return
        del in_flight[index]
        if keep_records:
            result.records.append(record)
        if on_record is not None:
            on_record(record)

    try:
        result.complete = await offer(enumerate(prompts), send, shape, stop=stop, grace_s=grace_s,
                                      count=len(prompts) if isinstance(prompts, Sized) else None)
    except EngineError as exc:
        result.complete = False
        # An EngineError that is not EngineDead (a closed engine): wrapped, so callers get one type.
        result.engine_error = exc if isinstance(exc, EngineDead) else EngineDead(str(exc))
    finally:
        result.left_pending = [in_flight[i] for i in sorted(in_flight)]
        result.wall_seconds = time.perf_counter() - t0
        result.stats = engine.stats().minus(before)
    result.complete = result.complete and not result.left_pending
    return result
