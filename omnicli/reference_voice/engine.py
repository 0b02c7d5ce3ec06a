"""ReferenceEngine: hibari-tts's bundled voice behind the engine contract (a reference voice, not a codec LM).

    engine = await ReferenceEngine.start(resolved_profile)
    async for chunk in engine.generate(request):   # one AudioChunk per sentence
        ...
    await engine.close()

Each request's text is split into sentences (hibari's own splitter); each sentence is synthesized
whole by the ONNX model and handed over as one chunk as soon as it is ready, so TTFP is the first
sentence's latency and an underrun is a sentence that came later than the audio before it ran out.
Requests run side by side on a thread pool (onnxruntime and the FFTs release the GIL); hibari's G2P
is pure Python and runs under a lock. Profile keys read: `codec.max_num_seqs` (requests at once,
capped at the CPU count), `codec.threads` (onnxruntime threads per request), `seed`,
`model_options.speed` (0.5 .. 2.0) and `model_options.voice` (only the bundled voice).
A prompt wav is ignored (the engine notes it once): this voice cannot clone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.engine.busy import BusyClock
from omnicli.engine.request import (
    AudioChunk,
    EngineDead,
    EngineError,
    EngineStats,
    RequestFailed,
    RequestInfo,
    TTSRequest,
)
from omnicli.errors import UsageError
from omnicli.reference_voice import BUNDLED_VOICE, ENGINE_NAME, HIBARI_VERSION, INSTALL_HINT, KIND

log = logging.getLogger(__name__)

SAMPLE_RATE = 24000
ENGLISH = {"en", "english", "auto"}


class ReferenceVoiceOptionError(UsageError):
    """A profile asks the reference voice for something it does not offer offline (exit 2)."""


def engine_options(profile: Any) -> dict:
    """The profile's settings this engine reads, checked (ReferenceVoiceOptionError names the key)."""
    options = dict(profile.model_options or {})
    voice = options.pop("voice", BUNDLED_VOICE)
    if voice != BUNDLED_VOICE:
        raise ReferenceVoiceOptionError(
            f"model_options.voice={voice!r}: the reference voice offers only its bundled voice {BUNDLED_VOICE!r} "
            "(hibari's other voices are downloads; omni never fetches them)")
    speed = options.pop("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.5 <= float(speed) <= 2.0:
        raise ReferenceVoiceOptionError(f"model_options.speed={speed!r}: a number from 0.5 to 2.0 (1.0 is the "
                                        "voice's own pace)")
    if options:
        raise ReferenceVoiceOptionError(f"model_options {', '.join(sorted(options))}: not an option of the reference "
                                        "voice (it reads voice and speed)")
    workers = max(1, min(profile.codec.max_num_seqs, os.cpu_count() or 1))
    return {"speed": float(speed), "workers": workers, "threads": max(1, profile.codec.threads)}


def _load_hibari(threads: int) -> Any:
    try:
        from hibari import Hibari
        from hibari.voices import voice_path
    except ModuleNotFoundError as exc:
        raise EngineError(f"hibari-tts is not installed ({exc}): {INSTALL_HINT}") from exc
    # The bundled voice's file, never a download (voice_path would fetch a voice that is not in the wheel).
    tts = Hibari(voice=BUNDLED_VOICE, model=voice_path(BUNDLED_VOICE, download_missing=False), threads=threads)
    import hibari

    if hibari.__version__ != HIBARI_VERSION:
        log.warning("hibari-tts %s is installed; omni was measured with %s (%s)", hibari.__version__, HIBARI_VERSION,
                    INSTALL_HINT)
    tts("Warm up.", seed=0)  # loads the G2P (lexicons, tagger) now rather than in the first request
    return tts


class ReferenceEngine:
    """The engine contract over one hibari voice; see the module docstring."""

    def __init__(self, resolved: Any, tts: Any, options: dict):
        self.resolved = resolved
        self.profile = resolved.profile
        self.model_name = self.profile.model
        self.device = "cpu"
        self.sample_rate = SAMPLE_RATE
        self.channels = 1
        self.startup_seconds = 0.0
        self._tts = tts
        self._speed = options["speed"]
        self._workers = options["workers"]
        self._threads = options["threads"]
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="omni-reference-voice")
        self._slots = asyncio.Semaphore(self._workers)
        self._g2p_lock = threading.Lock()
        self._busy = BusyClock()
        self._noted: set[str] = set()
        self._dead: str | None = None
        self._sentences = 0
        self._phonemes = 0
        self._samples = 0
        self._synth_s = 0.0

    # -- life cycle ------------------------------------------------------------
    @classmethod
    async def start(cls, resolved: Any) -> ReferenceEngine:
        t0 = time.perf_counter()
        options = engine_options(resolved.profile)
        loop = asyncio.get_running_loop()
        try:
            tts = await loop.run_in_executor(None, _load_hibari, options["threads"])
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"the reference voice (hibari-tts) failed to load: {type(exc).__name__}: {exc}") from exc
        engine = cls(resolved, tts, options)
        engine.startup_seconds = time.perf_counter() - t0
        log.info("reference voice %s ready in %.1fs (%s; %d at once)", BUNDLED_VOICE, engine.startup_seconds, KIND,
                 engine._workers)
        return engine

    async def close(self) -> None:
        """Ends serving; requests in flight get EngineDead at their next sentence. Safe to call twice."""
        if self._dead is None:
            self._dead = "engine is closed"
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> ReferenceEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests --------------------------------------------------------------
    def _note_once(self, key: str, message: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            log.warning(message)

    def _check(self, request: TTSRequest, info: RequestInfo) -> None:
        """What this voice cannot do: a request it would get wrong fails; one it can serve differently is noted."""
        if request.voice not in (None, BUNDLED_VOICE):
            raise RequestFailed(request.request_id, f"voice {request.voice!r}: the reference voice speaks only its "
                                f"bundled voice {BUNDLED_VOICE!r}", info)
        if request.language is not None and request.language.lower() not in ENGLISH:
            raise RequestFailed(request.request_id, f"language {request.language!r}: the reference voice speaks "
                                "English only", info)
        if request.ref_audio is not None:
            self._note_once("ref", "the reference voice cannot clone: prompt wavs are ignored (every row is spoken "
                            f"by its bundled voice {BUNDLED_VOICE!r})")
        if request.instruct:
            self._note_once("instruct", "the reference voice ignores instructions (instruct)")

    def _phonemize(self, text: str) -> list[str]:
        with self._g2p_lock:  # the G2P is pure Python with lazily built parts: one at a time
            sentences = list(self._tts.phonemize(text))
        # a sentence of punctuation alone ("...") has no phone to speak: the model would give a breath of noise
        return [s for s in sentences if any(ch.isalpha() for ch in s)]

    def _sentence(self, phonemes: str, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        pcm = self._tts.from_ids(self._tts.ids(phonemes), self._speed, rng)
        return np.asarray(pcm, dtype=np.float32).reshape(-1), time.perf_counter() - t0

    async def generate(self, request: TTSRequest) -> AsyncIterator[AudioChunk]:
        """One chunk per sentence; RequestFailed (this request) or EngineDead (closed)."""
        if self._dead is not None:
            raise EngineDead(self._dead)
        info = RequestInfo(submitted_at=time.perf_counter())
        self._check(request, info)
        loop = asyncio.get_running_loop()
        seed = request.seed if request.seed is not None else self.profile.seed
        rng = np.random.default_rng(seed)
        async with self._slots:
            self._busy.enter()
            try:
                try:
                    sentences = await loop.run_in_executor(self._pool, self._phonemize, request.text)
                except Exception as exc:
                    if self._dead is not None:  # closed while it waited: the pool takes no more work
                        raise EngineDead(self._dead) from None
                    raise RequestFailed(request.request_id, f"the reference voice's G2P failed: "
                                        f"{type(exc).__name__}: {exc}", info) from exc
                if not sentences:
                    raise RequestFailed(request.request_id, "no speakable text (the G2P found no phonemes)", info)
                info.prompt_tokens = sum(len(s) for s in sentences)
                samples = 0
                for i, phonemes in enumerate(sentences):
                    if self._dead is not None:
                        raise EngineDead(self._dead)
                    try:
                        pcm, seconds = await loop.run_in_executor(self._pool, self._sentence, phonemes, rng)
                    except Exception as exc:
                        if self._dead is not None:
                            raise EngineDead(self._dead) from None
                        raise RequestFailed(request.request_id, f"the reference voice failed: "
                                            f"{type(exc).__name__}: {exc}", info) from exc
                    samples += pcm.shape[0]
                    self._sentences += 1
                    self._samples += pcm.shape[0]
                    self._synth_s += seconds
                    last = i == len(sentences) - 1
                    if last and samples == 0:  # text of punctuation alone: no request "succeeds" silent
                        raise RequestFailed(request.request_id, "no speakable text (the voice produced no audio)", info)
                    if last:
                        info.stages = {"engine": ENGINE_NAME, "sentences": len(sentences), "phonemes":
                                       info.prompt_tokens}
                        self._phonemes += info.prompt_tokens
                    yield AudioChunk(pcm, last, time.perf_counter(), info if last else None)
            finally:
                self._busy.exit()

    # -- figures -----------------------------------------------------------------
    def write_run_files(self, run_dir: Path) -> list[Path]:
        return []

    def stats(self) -> EngineStats:
        return EngineStats(
            talker_time_s=self._busy.seconds(),
            codec_steps=self._sentences,
            codec_rows=self._sentences,
            codec_compute_s=self._synth_s,
            extra={"engine": ENGINE_NAME, "kind": KIND, "voice": BUNDLED_VOICE, "hibari_version": HIBARI_VERSION,
                   "requests_at_once": self._workers, "onnx_threads": self._threads, "speed": self._speed,
                   "sentences": self._sentences, "phonemes": self._phonemes,
                   "audio_s": self._samples / SAMPLE_RATE, "synth_s": self._synth_s},
        )
