"""The multi-stage TTS engine: talker (vLLM) -> chunker -> streaming codec.

    engine = await Engine.start(resolved_profile)
    async for chunk in engine.generate(request):   # AudioChunk(pcm, is_last, t)
        ...
    await engine.close()

One asyncio task per request pumps talker tokens through its Chunker into
the codec stage; the codec thread hands PCM back into a per-request queue,
which `generate` turns into AudioChunks. Nothing outside this package
touches the stages.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from omnicli.engine.chunker import Chunker
from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import CodecScheduler
from omnicli.engine.codec_stage import CodecStage
from omnicli.engine.models import load_model
from omnicli.engine.ref_cache import ReferenceCache
from omnicli.engine.request import AudioChunk, EngineError, EngineStats, RequestFailed, RequestInfo, TTSRequest
from omnicli.engine.talker import Talker
from omnicli.engine.windowed import WindowChunker, WindowedRunner

log = logging.getLogger(__name__)

_HEALTH_CHECK_S = 0.5  # how often a waiting request checks that both stages are alive


def _codec_runner(adapter, cfg, max_chunk_frames: int, device: str):
    """Ring-cache runner for streaming-transformer codecs; windowed runner for stateless ones (SNAC, NeuCodec)."""
    if adapter.windowed:
        return WindowedRunner(adapter.codec, cfg.max_num_seqs, max_chunk_frames=max_chunk_frames, device=device)
    return CodecRunner(
        adapter.codec.decoder,
        cfg.max_num_seqs,
        max_chunk_frames=max_chunk_frames,
        ring_headroom=cfg.codec_ring_headroom,
        contexts=cfg.layer_contexts,
        backend=cfg.codec_attention_backend,
        capture_sizes=cfg.capture_sizes,
        device=device,
    )


class Engine:
    def __init__(self, resolved, adapter, talker: Talker, codec: CodecStage, refs: ReferenceCache, pool: ThreadPoolExecutor):
        self.resolved = resolved
        self.profile = resolved.profile
        self.adapter = adapter
        self.talker = talker
        self.codec = codec
        self.refs = refs
        self._pool = pool
        self._loop = asyncio.get_running_loop()
        self._outputs: dict[str, asyncio.Queue] = {}
        self._encoding: dict[str, asyncio.Future] = {}  # reference key -> encoding in progress
        self._ids = itertools.count()
        self._closed = False
        self._last_delivery = time.perf_counter()  # any request's output; see fault()
        self._failure: str | None = None  # sticky; see fault()
        self.sample_rate = adapter.sample_rate
        self.channels = adapter.channels
        self.model_name = adapter.name
        self.device = resolved.platform
        self.startup_seconds = 0.0

    # -- life cycle ------------------------------------------------------------
    @classmethod
    async def start(cls, resolved) -> "Engine":
        """Builds every stage from a resolved profile; on failure nothing is left running."""
        t0 = time.perf_counter()
        profile = resolved.profile
        cfg = profile.codec
        device = "cuda" if resolved.platform == "cuda" else "cpu"
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="omni-ref-encoder")
        talker = codec = None
        try:
            seed = profile.model_options.get("seed")
            adapter = await loop.run_in_executor(pool, lambda: load_model(
                profile.model, seed=seed, codec_dtype=cfg.dtype, model_path=profile.model_path,
                codec_path=profile.codec_path, options=profile.model_options))
            adapter.codec.to(device)
            chunk_sizes = [cfg.initial_codec_chunk_frames, cfg.codec_chunk_frames, *(cfg.codec_chunk_ramp or [])]
            runner = _codec_runner(adapter, cfg, max(chunk_sizes), device)
            scheduler = CodecScheduler(cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.generation_min_batch_size, cfg.generation_max_wait_ms)
            refs = ReferenceCache(adapter.codec.encoder, adapter.ref_sample_rate or adapter.sample_rate, adapter.max_ref_samples)
            holder: list[Engine] = []
            codec = CodecStage(
                runner,
                scheduler,
                lambda *a: holder[0]._deliver_threadsafe(*a),
                policy=cfg.generation_coalescing_policy,
                threads=cfg.threads,
                pad_tail_frames=cfg.codec_chunk_frames if cfg.codec_pad_tail else 0,
            )
            talker_cfg = profile.talker.model_copy(update=adapter.sampling_overrides())
            talker = await Talker.start(str(adapter.talker_path), adapter.allowed_token_ids(), talker_cfg, platform=resolved.platform,
                                        seed=profile.seed, stop_token_ids=adapter.stop_token_ids())
            engine = cls(resolved, adapter, talker, codec, refs, pool)
            holder.append(engine)
            codec.start()
        except BaseException as exc:
            if talker is not None:
                talker.shutdown()
            pool.shutdown(wait=False)
            if isinstance(exc, (EngineError, asyncio.CancelledError, KeyboardInterrupt)):
                raise
            raise EngineError(f"engine failed to start: {type(exc).__name__}: {exc}") from exc
        engine.startup_seconds = time.perf_counter() - t0
        log.info("engine ready in %.1fs", engine.startup_seconds)
        return engine

    async def close(self) -> None:
        """Stops every stage and process; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        for q in self._outputs.values():
            q.put_nowait((np.zeros(0, np.float32), True, "engine closed"))
        self.codec.close()
        self.talker.shutdown()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> "Engine":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- requests --------------------------------------------------------------
    async def generate(self, request: TTSRequest) -> AsyncIterator[AudioChunk]:
        """Streams one request's audio; raises RequestFailed after any delivered audio."""
        if self._closed:
            raise EngineError("engine is closed")
        info = RequestInfo(submitted_at=time.perf_counter())
        rid = f"{request.request_id}#{next(self._ids)}"  # unique even when a caller repeats ids
        if (problem := self.adapter.check_text(request.text)) is not None:
            raise RequestFailed(request.request_id, problem, info)
        ref_codes = await self._reference_codes(request, info)
        prompt = self.adapter.build_prompt(request.text, request.ref_text or "", ref_codes)
        target = self.adapter.target_tokens(request.text)
        cap = request.max_new_tokens or self.profile.talker.max_new_tokens
        limit = self.profile.talker.max_model_len
        if target is None:  # a stop token ends it; the cap (or what the context leaves) may cut it first
            target = max(1, limit - len(prompt))
        max_tokens = min(target, cap)
        info.finish_reason = "length" if cap < target else "stop"
        info.prompt_tokens = len(prompt)
        if len(prompt) + max_tokens > limit:
            raise RequestFailed(request.request_id, f"prompt ({len(prompt)} tokens) plus audio ({max_tokens} tokens) exceeds talker.max_model_len={limit}", info)

        outputs: asyncio.Queue = asyncio.Queue()
        if not self._outputs:  # the engine-wide stall clock starts with the first request in flight
            self._last_delivery = time.perf_counter()
        self._outputs[rid] = outputs
        self.codec.open(rid)
        pump = asyncio.create_task(self._pump(rid, prompt, max_tokens, request.seed, info))
        try:
            async for chunk in self._drain(request.request_id, rid, outputs, info):
                yield chunk
        finally:
            pump.cancel()
            self._outputs.pop(rid, None)
            self.codec.cancel(rid)  # frees the slot if the request did not finish cleanly

    async def _reference_codes(self, request: TTSRequest, info: RequestInfo) -> np.ndarray | None:
        if request.ref_audio is None or not self.adapter.uses_reference:
            return None
        if not request.ref_sample_rate:
            raise RequestFailed(request.request_id, "reference audio given without its sample rate", info)
        pcm = self.refs.prepare(request.ref_audio, request.ref_sample_rate)
        if pcm.size == 0:
            raise RequestFailed(request.request_id, "reference audio has no samples", info)
        key = self.refs.key(pcm)
        codes = self.refs.lookup(key)
        if codes is not None:
            info.ref_cache = "hot"
            return codes
        # Concurrent requests with the same new reference share one encoding:
        # the first is "cold", the others wait for it and count as "hot".
        pending = self._encoding.get(key)
        if pending is not None:
            info.ref_cache = "hot"
            self.refs.count_hot()
            return await asyncio.shield(pending)
        info.ref_cache = "cold"
        future = self._loop.run_in_executor(self._pool, self.refs.encode, key, pcm)
        self._encoding[key] = future
        try:
            return await asyncio.shield(future)
        finally:
            self._encoding.pop(key, None)

    async def _pump(self, rid: str, prompt: list[int], max_tokens: int, seed: int | None, info: RequestInfo) -> None:
        """Talker tokens -> whole frames -> chunks -> codec stage."""
        cfg = self.profile.codec
        k = self.adapter.num_codebooks
        if self.adapter.windowed:
            chunker = WindowChunker(k, cfg.initial_codec_chunk_frames, cfg.codec_chunk_frames, cfg.codec_chunk_ramp,
                                    lookahead=self.adapter.codec.lookahead)
        else:
            chunker = Chunker(k, cfg.initial_codec_chunk_frames, cfg.codec_chunk_frames, cfg.codec_chunk_ramp)
        by_stop_token = bool(self.adapter.stop_token_ids())
        pending: list[int] = []
        finish: str | None = None
        try:
            async for delta in self.talker.generate(rid, prompt, max_tokens, seed):
                finish = delta.finish_reason if delta.finished else finish
                info.talker_tokens += len(delta.token_ids)
                pending.extend(self.adapter.keep_tokens(delta.token_ids))
                whole = len(pending) // k * k
                if whole:
                    frames = self.adapter.tokens_to_codes(np.asarray(pending[:whole]))
                    del pending[:whole]
                    info.codec_frames += len(frames)
                    for chunk in chunker.feed(frames):
                        self.codec.submit(rid, chunk, False)
            if finish not in ("length", "stop"):  # cut short: its audio is truncated, not finished
                if finish == "abort":  # we never abort a request whose pump runs: vLLM is shutting down
                    self._failure = self._failure or "the talker (vLLM engine core) aborted its requests: it is shutting down"
                reason = f"talker ended the request early (finish_reason={finish}, {info.talker_tokens} of {max_tokens} tokens)"
                self._deliver(rid, np.zeros(0, np.float32), True, reason)
                return
            if by_stop_token:  # the talker says whether the stop token or the cap ended it
                info.finish_reason = finish
            self.codec.submit(rid, chunker.flush(), True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the talker failed this request: end it with one error
            self._deliver(rid, np.zeros(0, np.float32), True, f"talker failed: {type(exc).__name__}: {exc}")

    async def _drain(self, request_id: str, rid: str, outputs: asyncio.Queue, info: RequestInfo) -> AsyncIterator[AudioChunk]:
        while True:
            try:
                pcm, is_last, error = await asyncio.wait_for(outputs.get(), _HEALTH_CHECK_S)
            except asyncio.TimeoutError:
                # No per-request idle limit: under heavy load a request may
                # legitimately wait long behind others; only an engine-wide
                # stall (no output to anyone) counts as a hung stage.
                if problem := self.fault():
                    raise RequestFailed(request_id, problem, info) from None
                continue
            if error is not None:
                if len(pcm):
                    yield AudioChunk(pcm, False, time.perf_counter())
                raise RequestFailed(request_id, error, info)
            if len(pcm) or is_last:
                yield AudioChunk(pcm, is_last, time.perf_counter(), info if is_last else None)
            if is_last:
                return

    def fault(self) -> str | None:
        """Why the engine as a whole can serve no more requests, or None while it can.

        A stage that died, or no output to any request in flight for
        `stage_timeout_s` (a hung stage). Callers use it to tell an engine
        failure from a failure of one request.
        """
        if self._closed:
            return "engine is closed"
        if not self.codec.alive:
            return f"codec stage stopped: {self.codec.failure!r}"
        if self.talker.errored():
            return "talker (vLLM engine core) died"
        stalled = time.perf_counter() - self._last_delivery
        if self._failure is None and self._outputs and stalled > self.profile.stage_timeout_s:
            # Sticky: a hung stage does not come back, and its requests are gone once failed.
            self._failure = f"no request got output for {stalled:.0f}s (stage_timeout_s={self.profile.stage_timeout_s:g}): the engine stopped responding"
        return self._failure

    def _deliver(self, rid: str, pcm: np.ndarray, is_last: bool, error: str | None) -> None:
        self._last_delivery = time.perf_counter()
        q = self._outputs.get(rid)
        if q is not None:
            q.put_nowait((pcm, is_last, error))

    def _deliver_threadsafe(self, rid: str, pcm: np.ndarray, is_last: bool, error: str | None) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._deliver, rid, pcm, is_last, error)

    # -- figures -----------------------------------------------------------------
    def stats(self) -> EngineStats:
        return EngineStats(
            talker_tokens=self.talker.tokens_generated,
            talker_time_s=self.talker.busy_seconds_now(),
            codec_steps=self.codec.steps,
            codec_rows=self.codec.rows,
            codec_frames=self.codec.frames,
            codec_compute_s=self.codec.compute_s,
            coalescing_waits=self.codec.scheduler.coalescing_waits,
            coalescing_wait_ms=self.codec.scheduler.coalescing_wait_s * 1000.0,
            ref_hot=self.refs.hot,
            ref_cold=self.refs.cold,
            extra={"codec_ring_headroom": self.profile.codec.codec_ring_headroom},
        )
