"""The multi-stage TTS engine: talker (vLLM) -> chunker -> streaming codec.

    engine = await Engine.start(resolved_profile)
    async for chunk in engine.generate(request):   # AudioChunk(pcm, is_last, t)
        ...
    await engine.close()

One asyncio task per request pumps talker tokens through its Chunker into
the codec stage; the codec thread hands PCM back through the
`OutputRouter` into a per-request queue of typed values, which `generate`
turns into AudioChunks, `RequestFailed` (this request only) or
`EngineDead` (the engine as a whole). The engine classifies every failure
itself, so callers need not ask: one watchdog task declares the engine dead
when `fault()` (a pure query) names a dead stage or no request in flight
got output for `stage_timeout_s`. Nothing outside this package touches the
stages.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from omnicli.engine.chunker import Chunker, describe_geometry, stream_geometry
from omnicli.engine.codec_runner import CodecRunner
from omnicli.engine.codec_scheduler import CodecScheduler
from omnicli.engine.codec_stage import CodecStage
from omnicli.engine.memory import check_kv_cache_fits, check_talker_fits
from omnicli.engine.models import load_model
from omnicli.engine.outputs import Dead, Failed, OutputRouter
from omnicli.engine.ref_cache import ReferenceCache
from omnicli.engine.request import (
    AudioChunk,
    EngineDead,
    EngineError,
    EngineStats,
    FinishReason,
    RequestFailed,
    RequestInfo,
    TTSRequest,
    request_problem,
)
from omnicli.engine.talker import Talker
from omnicli.engine.windowed import WindowChunker, WindowCodec, WindowedRunner

if TYPE_CHECKING:
    from omnicli.engine.models.base import ModelAdapter
    from omnicli.engine.outputs import Output
    from omnicli.profile import ResolvedProfile
    from omnicli.profile.schema import CodecStageConfig, Profile, TalkerConfig

log = logging.getLogger(__name__)

WATCHDOG_PERIOD_S = 0.5  # how often the watchdog checks that both stages are alive and making progress


def _codec_runner(
    adapter: ModelAdapter, cfg: CodecStageConfig, max_chunk_frames: int, device: str
) -> CodecRunner | WindowedRunner:
    """Ring-cache runner for streaming-transformer codecs; windowed runner for stateless ones (SNAC, NeuCodec)."""
    codec = adapter.codec
    if isinstance(codec, WindowCodec):
        return WindowedRunner(codec, cfg.max_num_seqs, max_chunk_frames=max_chunk_frames, device=device)
    return CodecRunner(
        codec.decoder,
        cfg.max_num_seqs,
        max_chunk_frames=max_chunk_frames,
        ring_headroom=cfg.codec_ring_headroom,
        contexts=cfg.layer_contexts,
        backend=cfg.codec_attention_backend,
        capture_sizes=cfg.capture_sizes,
        device=device,
    )


def _chunker(adapter: ModelAdapter, cfg: CodecStageConfig) -> Chunker:
    """Windowed families' chunks carry their codec's look-ahead frames."""
    codec = adapter.codec
    if isinstance(codec, WindowCodec):
        return WindowChunker(
            adapter.num_codebooks,
            cfg.initial_codec_chunk_frames,
            cfg.codec_chunk_frames,
            cfg.codec_chunk_ramp,
            lookahead=codec.lookahead,
        )
    return Chunker.from_config(adapter.num_codebooks, cfg)


def _finish_reason(reason: str | None) -> FinishReason | None:
    """vLLM's finish reason as a request's; None when vLLM ended it otherwise (aborted, cut short)."""
    if reason == "stop":
        return "stop"
    if reason == "length":
        return "length"
    return None


def _talker_folder(profile: Profile) -> Path | None:
    """The talker checkpoint folder of a family that reads one from disk (CheckpointMissing if absent)."""
    from omnicli.checkpoints import locate
    from omnicli.families import get_family

    spec = next((s for s in get_family(profile.model).checkpoint_specs() if s.role == "talker"), None)
    return None if spec is None else locate(spec, profile.model_path, profile.model)


def _check_talker_fits(folder: Path, talker_cfg: TalkerConfig, platform: str) -> None:
    check_talker_fits(
        folder / "config.json",
        talker_cfg.dtype,
        platform,
        kv_cache_space_gb=talker_cfg.kv_cache_space_gb,
        gpu_memory_utilization=talker_cfg.gpu_memory_utilization,
    )


def _stage_choices(profile: Profile, device: str) -> tuple[Profile, dict | None]:
    """The profile with its `auto` dtypes and `0` thread counts decided for this machine, and (CPU) what
    was decided and why, printed once here."""
    from omnicli.profile.cpu_stages import resolve_cpu_stages
    from omnicli.runtime.cpu_dtype import split_threads

    if device == "cpu":
        cpu = resolve_cpu_stages(profile)
        cpu.announce(log)
        talker = {"dtype": cpu.talker.dtype, "threads": cpu.talker_threads}
        codec = {"dtype": cpu.codec.dtype, "threads": cpu.codec_threads}
        recorded: dict | None = cpu.as_dict()
    else:  # CUDA: vLLM picks the talker's `auto`; the codec's is float32, the native codec's default
        threads = split_threads(profile.talker.threads, profile.codec.threads)
        talker = {"threads": threads[0]}
        codec = {"threads": threads[1], "dtype": "float32" if profile.codec.dtype == "auto" else profile.codec.dtype}
        recorded = None
    updated = profile.model_copy(update={"talker": profile.talker.model_copy(update=talker),
                                         "codec": profile.codec.model_copy(update=codec)})
    return updated, recorded


class Engine:
    def __init__(
        self, resolved: ResolvedProfile, adapter: ModelAdapter, talker: Talker, codec: CodecStage, refs: ReferenceCache,
        pool: ThreadPoolExecutor, outputs: OutputRouter, codec_cfg: CodecStageConfig,
    ) -> None:
        self.resolved = resolved
        self.profile = resolved.profile
        self.adapter = adapter
        self.talker = talker
        self.codec = codec
        self.refs = refs
        self._pool = pool
        self._loop = asyncio.get_running_loop()
        self._outputs = outputs
        self._encoding: dict[str, asyncio.Future[np.ndarray]] = {}  # reference key -> encoding in progress
        self._ids = itertools.count()
        self._closed = False
        self._dead: str | None = None  # why the engine stopped serving; set once, by _die
        self._watchdog: asyncio.Task[None] | None = None
        self._warned_voice = False
        self.sample_rate = adapter.sample_rate
        self.channels = adapter.channels
        self.model_name = adapter.name
        self.device = resolved.platform
        self.startup_seconds = 0.0
        self.codec_cfg = codec_cfg  # the codec section with the chunk sizes this engine uses (stream_geometry)
        self.cpu_stages: dict | None = None  # a CPU run's dtype and thread choices (profile/cpu_stages.py)

    # -- life cycle ------------------------------------------------------------
    @classmethod
    async def start(cls, resolved: ResolvedProfile) -> Engine:
        """Builds every stage from a resolved profile; on failure nothing is left running."""
        t0 = time.perf_counter()
        device = "cuda" if resolved.platform == "cuda" else "cpu"
        profile, cpu_stages = _stage_choices(resolved.profile, device)
        cfg = profile.codec
        loop = asyncio.get_running_loop()
        check_kv_cache_fits(profile.talker.kv_cache_space_gb, resolved.platform)  # before loading anything
        # Weights that cannot fit make vLLM's engine core grow until it is killed: say so first.
        talker_dir = _talker_folder(profile)  # None: built on first use (omni-tiny), checked once built
        if talker_dir is not None:
            _check_talker_fits(talker_dir, profile.talker, resolved.platform)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="omni-ref-encoder")
        talker = codec = None
        try:
            seed = profile.model_options.get("seed")
            adapter = await loop.run_in_executor(pool, lambda: load_model(
                profile.model, seed=seed, codec_dtype=cfg.dtype, model_path=profile.model_path,
                codec_path=profile.codec_path, options=profile.model_options))
            adapter.codec.to(device)
            cfg = stream_geometry(resolved, adapter.stream_geometry).model_copy(
                update={"dtype": cfg.dtype, "threads": cfg.threads})  # as decided for this machine above
            # The largest chunk a request's Chunker emits (look-ahead frames not included: a windowed runner adds them).
            max_chunk = Chunker.from_config(adapter.num_codebooks, cfg).max_chunk_frames
            runner = _codec_runner(adapter, cfg, max_chunk, device)
            refs = ReferenceCache(
                adapter.codec.encoder, adapter.ref_sample_rate or adapter.sample_rate, adapter.max_ref_samples
            )
            outputs = OutputRouter(loop)
            codec = CodecStage.from_config(runner, CodecScheduler.from_config(cfg), outputs.from_stage, cfg)
            talker_cfg = profile.talker.model_copy(update=adapter.sampling_overrides())
            if talker_dir is None:
                _check_talker_fits(Path(adapter.talker_path), profile.talker, resolved.platform)
            talker = await Talker.start(
                str(adapter.talker_path),
                adapter.allowed_token_ids(),
                talker_cfg,
                platform=resolved.platform,
                seed=profile.seed,
                stop_token_ids=adapter.stop_token_ids(),
            )
            engine = cls(resolved, adapter, talker, codec, refs, pool, outputs, cfg)
            engine.cpu_stages = cpu_stages
            codec.start()
            engine._watchdog = asyncio.create_task(engine._watch(), name="omni-engine-watchdog")
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
        self._die("engine is closed")
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        self.codec.close()
        self.talker.shutdown()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests --------------------------------------------------------------
    async def generate(self, request: TTSRequest) -> AsyncIterator[AudioChunk]:
        """Streams one request's audio; raises RequestFailed (this request) or EngineDead (all of them)."""
        if self._dead is not None:
            raise EngineDead(self._dead)
        info = RequestInfo(submitted_at=time.perf_counter())
        rid = f"{request.request_id}#{next(self._ids)}"  # unique even when a caller repeats ids
        if (problem := request_problem(request) or self.adapter.check_text(request.text)) is not None:
            raise RequestFailed(request.request_id, problem, info)
        ref_codes = await self._reference_codes(request, info)
        if request.voice and not self.adapter.uses_voice:
            self._warn_voice_ignored(request)
        prompt = self.adapter.build_prompt(request.text, request.ref_text or "", ref_codes, voice=request.voice)
        target = self.adapter.target_tokens(request.text)
        cap = request.max_new_tokens or self.profile.talker.max_new_tokens
        limit = self.profile.talker.max_model_len
        if target is None:  # a stop token ends it; the cap (or what the context leaves) may cut it first
            target = max(1, limit - len(prompt))
        max_tokens = min(target, cap)
        info.finish_reason = "length" if cap < target else "stop"
        info.prompt_tokens = len(prompt)
        if len(prompt) + max_tokens > limit:
            raise RequestFailed(
                request.request_id,
                f"prompt ({len(prompt)} tokens) plus audio ({max_tokens} tokens) exceeds talker.max_model_len={limit}",
                info,
            )

        if self._dead is not None:  # it died while this request encoded its reference
            raise EngineDead(self._dead)
        outputs = self._outputs.open(rid)  # from here on, a death reaches this request through its queue
        self.codec.open(rid)
        pump = asyncio.create_task(self._pump(rid, prompt, max_tokens, request.seed, info))
        try:
            async for chunk in self._drain(request.request_id, outputs, info):
                yield chunk
        finally:
            pump.cancel()
            self._outputs.close(rid)
            self.codec.cancel(rid)  # frees the slot if the request did not finish cleanly

    def _warn_voice_ignored(self, request: TTSRequest) -> None:
        # Once per engine: a manifest written for Orpheus' named voices stays usable
        # with any family, and one line says the voices are not used.
        if not self._warned_voice:
            self._warned_voice = True
            log.warning("model %s has no named voices: the voice %r of request %s and of any later request is ignored",
                        self.adapter.name, request.voice, request.request_id)

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
        k = self.adapter.num_codebooks
        chunker = _chunker(self.adapter, self.codec_cfg)
        by_stop_token = bool(self.adapter.stop_token_ids())
        pending: list[int] = []
        finish: str | None = None
        try:
            async for delta in self.talker.generate(rid, prompt, max_tokens, seed):
                finish = delta.finish_reason if delta.finished else finish
                if delta.token_ids:  # when the talker's output reached us: vLLM's token timings
                    info.token_times.append(time.perf_counter())
                    if info.first_token_at is None:
                        info.first_token_at = info.token_times[0]
                info.talker_tokens += len(delta.token_ids)
                pending.extend(self.adapter.keep_tokens(delta.token_ids))
                whole = len(pending) // k * k
                if whole:
                    frames = self.adapter.tokens_to_codes(np.asarray(pending[:whole]))
                    del pending[:whole]
                    info.codec_frames += len(frames)
                    for chunk in chunker.feed(frames):
                        self.codec.submit(rid, chunk, False)
            done = _finish_reason(finish)
            if done is None:  # cut short: its audio is truncated, not finished
                if finish == "abort":  # we never abort a request whose pump runs: vLLM is shutting down
                    self._die("the talker (vLLM engine core) aborted its requests: it is shutting down")
                    return
                reason = (f"talker ended the request early (finish_reason={finish}, {info.talker_tokens} of"
                          f" {max_tokens} tokens)")
                self._outputs.put(rid, Failed(reason))
                return
            if by_stop_token:  # the talker says whether the stop token or the cap ended it
                info.finish_reason = done
            self.codec.submit(rid, chunker.flush(), True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self.talker.errored():  # its engine core died: every request goes with it
                self._die(f"talker (vLLM engine core) died: {type(exc).__name__}: {exc}")
            else:  # the talker failed this request only
                self._outputs.put(rid, Failed(f"talker failed: {type(exc).__name__}: {exc}"))

    async def _drain(
        self, request_id: str, outputs: asyncio.Queue[Output], info: RequestInfo
    ) -> AsyncIterator[AudioChunk]:
        while True:
            value = await outputs.get()
            if isinstance(value, Dead):
                raise EngineDead(value.reason)
            if isinstance(value, Failed):
                raise RequestFailed(request_id, value.reason, info)
            if len(value.pcm) or value.last:
                yield AudioChunk(value.pcm, value.last, time.perf_counter(), info if value.last else None)
            if value.last:
                return

    # -- failures ----------------------------------------------------------------
    def fault(self) -> str | None:
        """Why the engine as a whole can serve no more requests, or None while it can (a pure query)."""
        return self._dead or self._stage_down()

    def _stage_down(self) -> str | None:
        if not self.codec.alive:
            return f"codec stage stopped: {self.codec.failure!r}"
        if self.talker.errored():
            return "talker (vLLM engine core) died"
        return None

    def _stalled(self) -> str | None:
        """No request in flight got output for `stage_timeout_s`: a hung stage.

        Not a per-request limit: under heavy load one request may wait long
        behind others, which is load, not a hang.
        """
        limit = self.profile.stage_timeout_s
        idle = self._outputs.idle_seconds()
        if len(self._outputs) and idle > limit:
            return f"no request got output for {idle:.0f}s (stage_timeout_s={limit:g}): the engine stopped responding"
        return None

    async def _watch(self) -> None:
        """The one watchdog: declares the engine dead when a stage died or hung."""
        while True:  # until close() cancels it
            await asyncio.sleep(WATCHDOG_PERIOD_S)
            if self._dead is None and (reason := self.fault() or self._stalled()):
                self._die(reason)

    def _die(self, reason: str) -> None:
        """The engine stops serving (for good): every request in flight and every later one gets EngineDead."""
        if self._dead is None:
            self._dead = reason
            if not self._closed:
                log.warning("engine stopped: %s", reason)
        self._outputs.put_all(Dead(self._dead))

    # -- figures -----------------------------------------------------------------
    def write_run_files(self, run_dir: Path) -> list[Path]:
        return []  # everything about this engine is in the resolved profile the results record

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
            # Windowed codecs have no rings: the setting means nothing there.
            extra={"codec_ring_headroom": None if self.adapter.windowed else self.profile.codec.codec_ring_headroom,
                   "codec_chunks": describe_geometry(self.codec_cfg), "cpu_stages": self.cpu_stages},
        )
