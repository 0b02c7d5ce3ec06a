"""OmniEngine: vLLM-Omni's own TTS pipelines (AsyncOmni) behind the engine contract, in-process.

    engine = await OmniEngine.start(resolved_profile)
    async for chunk in engine.generate(request):   # AudioChunk(pcm, is_last, t)
        ...
    await engine.close()

vLLM-Omni runs each stage (talker with its code predictor; Code2Wav) as an
engine-core process behind an orchestrator thread; our profile becomes a
deploy overlay (overlay.py) on the packaged deploy config. Requests are built
as vLLM-Omni's server builds them (the family's builder, named by its
OmniFamilySpec in spec.py), off the event loop. In
flight requests are capped at the stages' `max_num_seqs` here: vLLM-Omni
admits every request at once (unbounded waiting queues, each one prewarmed
into the codec stage). A fatal stage error, or a stage process that is gone,
kills the engine: every request in flight and every later one gets
`EngineDead`; anything else fails that request alone (`RequestFailed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from omnicli.engine.busy import BusyClock
from omnicli.engine.request import (
    AudioChunk,
    EngineDead,
    EngineError,
    EngineStats,
    RequestFailed,
    RequestInfo,
    TTSRequest,
    request_problem,
)
from omnicli.runtime import run_folder
from omnicli.runtime.orphans import OrphanGuard, is_resource_tracker, terminate_tree
from omnicli.runtime.quiet import quiet_vllm
from omnicli.runtime.run_folder import RunFolder
from omnicli.runtime.signals import interrupts_blocked_for_children
from omnicli.vllm_omni import stage_metrics
from omnicli.vllm_omni.spec import OmniFamilySpec, omni_family

log = logging.getLogger(__name__)

WATCHDOG_PERIOD_S = 0.5
STAGE_START_TIMEOUT_S = 900  # engine start on a loaded 2-core machine takes minutes


def _import_async_omni():
    """AsyncOmni, with our import shims in place (they must precede vLLM-Omni's first import)."""
    from omnicli.vllm_omni.shims import install_import_shims

    quiet_vllm()
    install_import_shims()
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    # No core pinning (machines are shared), as for the native talker; inherited by every stage process.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    try:
        from vllm_omni.entrypoints.async_omni import AsyncOmni
    except ModuleNotFoundError as exc:
        from omnicli.vllm_omni import INSTALL_HINT

        raise EngineError(f"vLLM-Omni is not installed ({exc}): {INSTALL_HINT}") from exc
    return AsyncOmni


def _delta_defaults(omni) -> list:
    """The deploy config's per-stage default sampling params, as DELTA outputs (what the server streams)."""
    from vllm_omni.entrypoints.utils import coerce_param_message_types

    return coerce_param_message_types(list(omni.default_sampling_params_list), True)


def _pcm(value, channels: int) -> np.ndarray:
    """One audio tensor/array -> float32 (samples,) mono or (samples, channels)."""
    arr = value.detach().to("cpu").float().numpy() if hasattr(value, "detach") else np.asarray(value, dtype=np.float32)
    arr = np.asarray(arr, dtype=np.float32)
    if channels == 1:
        return arr.reshape(-1)
    if arr.ndim == 1:
        return np.repeat(arr[:, None], channels, axis=1)
    arr = arr.reshape(-1, arr.shape[-1])  # (channels, T) as the codec gives it
    return np.ascontiguousarray(arr.T if arr.shape[0] == channels else arr)


class _AudioStream:
    """New samples from successive outputs: a tensor is one delta, a list grows (cumulative: take the tail)."""

    def __init__(self, channels: int):
        self.channels = channels
        self._seen = 0
        self.samples = 0

    def feed(self, audio) -> np.ndarray:
        if audio is None:
            parts = []
        elif isinstance(audio, (list, tuple)):
            parts, self._seen = list(audio[self._seen:]), len(audio)
        else:
            parts = [audio]
        pcms = [_pcm(p, self.channels) for p in parts]
        pcms = [p for p in pcms if p.size]
        if not pcms:
            shape = (0,) if self.channels == 1 else (0, self.channels)
            return np.zeros(shape, np.float32)
        pcm = np.concatenate(pcms, axis=0)
        self.samples += pcm.shape[0]
        return pcm


class OmniEngine:
    """The engine contract over one AsyncOmni; see the module docstring."""

    def __init__(self, resolved, omni, builder, overlay, overlay_path: Path, workdir: RunFolder,
                 processes: list[psutil.Process], guard: OrphanGuard, pool: ThreadPoolExecutor):
        profile = resolved.profile
        self.resolved = resolved
        self.profile = profile
        self.model_name = profile.model
        self.device = resolved.platform
        self.spec: OmniFamilySpec = omni_family(profile.model)
        self.sample_rate, self.channels = self.spec.sample_rate, self.spec.channels
        self.startup_seconds = 0.0
        self.overlay = overlay
        self.overlay_path = overlay_path
        self._omni = omni
        self._builder = builder
        self._workdir = workdir
        self._processes = processes  # the stage processes vLLM-Omni started (children and theirs)
        self._guard = guard
        self._pool = pool
        self._slots = asyncio.Semaphore(max(1, min(profile.talker.max_num_seqs, profile.codec.max_num_seqs)))
        self._ids = itertools.count()
        self._busy = BusyClock()
        self._counters = stage_metrics.StageCounters(processes)
        self._dead: str | None = None
        self._closed = False
        self._watchdog: asyncio.Task | None = None
        self._streams: dict[str, asyncio.Task] = {}
        self._started: dict[int, Any] = {}  # pid -> the multiprocessing.Process that started a stage

    # -- life cycle ------------------------------------------------------------
    @classmethod
    async def start(cls, resolved) -> OmniEngine:
        """Starts every stage of the family's pipeline; on failure nothing is left running."""
        from omnicli.vllm_omni.checkpoints import locate_checkpoint, locate_codec
        from omnicli.vllm_omni.overlay import build_overlay, write_overlay

        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        profile = resolved.profile
        try:
            spec = omni_family(profile.model)
        except ValueError as exc:
            raise EngineError(f"model {profile.model!r}: {exc}") from None
        ckpt = locate_checkpoint(profile.model, profile.model_path)
        codec = locate_codec(profile.model, profile.codec_path)
        spec.check_startable(ckpt, profile.model_options)  # before any stage starts
        AsyncOmni = _import_async_omni()
        overlay = build_overlay(resolved, ckpt, codec)
        if overlay.cpu is not None:  # dtype and threads chosen for this CPU (cpu_stage.py)
            overlay.cpu.announce(log)
        for key, reason in overlay.ignored:
            log.warning("profile key %s is not read by vLLM-Omni's %s pipeline: %s", key, profile.model, reason)
        for folder in run_folder.sweep():
            log.info("removed %s, left by an earlier run that was killed", folder)
        workdir = RunFolder()  # this run's sockets and overlay; see runtime/run_folder.py
        overlay_path = write_overlay(overlay, workdir.path)
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="omni-vllm-omni")
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        # vLLM-Omni's stage processes outlive a parent killed with SIGKILL; the watcher then removes workdir
        guard = OrphanGuard(workdir.path)
        omni = None
        try:
            with _ipc_sockets_in(workdir.path):  # vLLM reads it as it names each socket; stages inherit it
                omni = await loop.run_in_executor(pool, _start_pipeline, AsyncOmni, ckpt, overlay, overlay_path)
            builder = await loop.run_in_executor(pool, spec.make_builder, ckpt, codec, _delta_defaults(omni),
                                                 profile.model_options, list(omni.stage_configs))
        except BaseException as exc:
            await loop.run_in_executor(None, _stop, omni, before, guard, None, workdir)
            pool.shutdown(wait=False)
            if isinstance(exc, (EngineError, asyncio.CancelledError, KeyboardInterrupt)):
                raise
            raise EngineError(f"vLLM-Omni failed to start {profile.model} from {ckpt}: {type(exc).__name__}: {exc} "
                              "(vLLM-Omni's log above names the cause)") from exc
        # multiprocessing's resource tracker ends by itself; everything else must live as long as the engine
        processes = [p for p in psutil.Process().children(recursive=True)
                     if p.pid not in before and p.pid != guard.watcher_pid and not is_resource_tracker(p)]
        # the stages' engine cores first (ours: how they ended can be told), then their workers
        processes.sort(key=lambda p: p.ppid() != os.getpid())
        workdir.note_pids(p.pid for p in processes)
        engine = cls(resolved, omni, builder, overlay, overlay_path, workdir, processes, guard, pool)
        # kept: vLLM reaps a stage that dies, and then only this object knows how it ended
        engine._started = {p.pid: p for p in multiprocessing.active_children() if p.pid is not None}
        engine._watchdog = asyncio.create_task(engine._watch(), name="omni-vllm-omni-watchdog")
        engine.startup_seconds = time.perf_counter() - t0
        log.info(
            "vLLM-Omni %s ready in %.1fs (%d stage processes)", profile.model, engine.startup_seconds, len(processes)
        )
        return engine

    async def close(self) -> None:
        """Stops the pipeline and every process it started; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._die("engine is closed")
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        for task in list(self._streams.values()):
            task.cancel()
        omni, self._omni = self._omni, None
        await asyncio.get_running_loop().run_in_executor(
            None, _stop, omni, None, self._guard, self._processes, self._workdir
        )
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> OmniEngine:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- requests --------------------------------------------------------------
    async def generate(self, request: TTSRequest) -> AsyncIterator[AudioChunk]:
        """Streams one request's audio; raises RequestFailed (this request) or EngineDead (all of them)."""
        from omnicli.vllm_omni.requests import RequestInvalid, length_finish_error

        if self._dead is not None:
            raise EngineDead(self._dead)
        info = RequestInfo(submitted_at=time.perf_counter())
        if (problem := request_problem(request)) is not None:  # a bad seed must not reach a stage's input thread
            raise RequestFailed(request.request_id, problem, info)
        loop = asyncio.get_running_loop()
        try:
            built = await loop.run_in_executor(self._pool, self._builder.build, request)
        except RequestInvalid as exc:
            raise RequestFailed(request.request_id, str(exc), info) from None
        except Exception as exc:
            raise RequestFailed(
                request.request_id, f"could not build the request: {type(exc).__name__}: {exc}", info
            ) from exc
        info.prompt_tokens = len(built.prompt["prompt_token_ids"])
        async with self._slots:
            if self._dead is not None:
                raise EngineDead(self._dead)
            rid = f"{request.request_id}#{next(self._ids)}"
            stream = _AudioStream(self.channels)
            final = None
            self._busy.enter()
            handed_at = time.perf_counter()  # vLLM-Omni times its stages from here
            try:
                outputs = self._omni.generate(
                    built.prompt,
                    request_id=rid,
                    sampling_params_list=built.sampling_params_list,
                    output_modalities=["audio"],
                )
                async for out in self._outputs(request.request_id, outputs, info):
                    mm = out.multimodal_output or {}
                    pcm = stream.feed(mm.get("audio"))
                    if out.finished:
                        final = out
                        break
                    if pcm.shape[0]:
                        yield AudioChunk(pcm, False, time.perf_counter())
            finally:
                self._busy.exit()
        if final is None:
            raise RequestFailed(request.request_id, "vLLM-Omni ended the request without a final output", info)
        figures = stage_metrics.from_output(final)
        stage_metrics.fill_info(info, figures, stream.samples, self.sample_rate, handed_at)
        self._counters.add(figures, info.codec_frames)
        if stream.samples == 0 and self.spec.no_audio_error is not None:
            raise RequestFailed(request.request_id, self.spec.no_audio_error, info)
        if info.finish_reason == "length":
            info.hit_cap = built.explicit_cap
            if (problem := length_finish_error(self.spec, built, info.talker_tokens)) is not None:
                raise RequestFailed(request.request_id, problem, info)
        yield AudioChunk(pcm, True, time.perf_counter(), info)

    async def _outputs(self, request_id: str, outputs, info: RequestInfo):
        """vLLM-Omni's outputs for one request, its errors sorted into RequestFailed and EngineDead."""
        from vllm_omni.entrypoints.omni_base import OmniEngineDeadError

        try:
            async for out in outputs:
                yield out
        except OmniEngineDeadError as exc:
            # Its text points at "the stack trace above", which a killed stage never printed.
            self._die(self._stage_down() or f"a vLLM-Omni stage stopped serving ({type(exc).__name__}; "
                      "vLLM-Omni's error lines above, if it printed any, name the cause)")
            raise EngineDead(self._dead or str(exc)) from None
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            if self._dead is not None:
                raise EngineDead(self._dead) from None
            raise RequestFailed(request_id, f"vLLM-Omni failed the request: {type(exc).__name__}: {exc}", info) from exc
        finally:
            with contextlib.suppress(Exception):
                await outputs.aclose()

    # -- failures ----------------------------------------------------------------
    @property
    def processes(self) -> list[psutil.Process]:
        """The processes vLLM-Omni started for this engine (its stage engine cores and their workers)."""
        return list(self._processes)

    def _stage_down(self) -> str | None:
        """Why the pipeline cannot serve: a stage process that is gone first (the usual cause), named."""
        for proc in self._processes:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                pass
            ended = _how_it_ended(proc.pid, self._started.get(proc.pid))
            return f"a vLLM-Omni stage process ({_describe(proc)}) {ended}"
        if self._omni is not None and getattr(self._omni, "errored", False):
            return "vLLM-Omni's orchestrator stopped (vLLM-Omni's error lines above, if it printed any, name the cause)"
        return None

    async def _watch(self) -> None:
        while True:  # until close() cancels it
            await asyncio.sleep(WATCHDOG_PERIOD_S)
            if self._dead is None and (reason := self._stage_down()):
                self._die(reason)

    def _die(self, reason: str) -> None:
        """The engine stops serving, for good: requests in flight end with EngineDead."""
        if self._dead is not None:
            return
        self._dead = reason
        if not self._closed:
            log.warning("engine stopped: %s", reason)
        omni = self._omni
        if omni is not None:  # wake every request waiting on a stage that will never answer
            with contextlib.suppress(Exception):
                _fail_all(omni, reason)

    # -- figures -----------------------------------------------------------------
    def write_run_files(self, run_dir: Path) -> list[Path]:
        """The deploy overlay this run's profile became (its digest is in `stats().extra`)."""
        from omnicli.vllm_omni.overlay import write_overlay

        return [write_overlay(self.overlay, run_dir)]

    def stats(self) -> EngineStats:
        counters = self._counters.to_dict()
        return EngineStats(
            talker_tokens=self._counters.talker_tokens,
            talker_time_s=self._busy.seconds(),
            codec_frames=self._counters.codec_frames,
            # the codec stage's CPU seconds: its requests' in-stage times overlap and include waiting
            codec_compute_s=counters["codec_cpu_s"],
            stages=counters,
            extra={"engine": "vllm-omni",
                   # what bench results record about the deploy overlay the profile became
                   "deploy_overlay": {"digest": self.overlay.digest, "platform": self.overlay.platform,
                                      "ignored": [f"{k}: {why}" for k, why in self.overlay.ignored]},
                   "cpu_stages": self.overlay.cpu.as_dict() if self.overlay.cpu else None},
        )


def _start_pipeline(AsyncOmni, ckpt: Path, overlay, overlay_path: Path):
    # The stage processes (and the threads that start them) are started with Ctrl-C blocked: a
    # terminal's Ctrl-C reaches the whole process group, and we stop them ourselves.
    with interrupts_blocked_for_children():
        return AsyncOmni(
            model=str(ckpt),
            deploy_config=str(overlay_path),
            stage_overrides=overlay.stage_overrides or None,
            trust_remote_code=False,  # outranks every deploy key: no folder's auto_map code runs
            stage_init_timeout=STAGE_START_TIMEOUT_S,
            init_timeout=STAGE_START_TIMEOUT_S,
            log_stats=False,
            parallel_stage_init=True,
        )


def _fail_all(omni, reason: str) -> None:
    """Ends every request AsyncOmni is still waiting on with a fatal error (they would wait for ever)."""
    from vllm_omni.engine.messages import ErrorMessage

    for state in list(getattr(omni, "request_states", {}).values()):
        queue = getattr(state, "queue", None)
        if queue is not None:
            queue.put_nowait(ErrorMessage(request_id=state.request_id, stage_id=-1, error=reason, fatal=True))


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}, {proc.name()}"
    except psutil.Error:
        return f"pid {proc.pid}"


def _how_it_ended(pid: int, started: Any = None) -> str:
    """How a stage process of ours ended: killed by which signal, or its exit status; else "is gone".
    `started`: the multiprocessing.Process that started it, if known."""
    code = _exit_code(pid, started)
    if code is None:
        return "is gone"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return (f"was killed by {name} (by another process or the kernel's out-of-memory killer: "
                "a killed process prints no error of its own)")
    return f"exited with status {code} (vLLM-Omni's error lines above, if it printed any, name the cause)"


def _exit_code(pid: int, started: Any = None, wait_s: float = 1.0) -> int | None:
    """-N for killed by signal N, else the exit status; None when unknown. vLLM's process manager
    reaps a stage at once (it waits on the process's sentinel), so its code is in the
    multiprocessing.Process object that started it; a child of ours not started that way is
    looked at without being reaped (waitid WNOWAIT). A process seen gone may still be in the
    middle of its exit: its status is waited for up to `wait_s` (once, when the engine dies)."""
    deadline = time.monotonic() + wait_s
    while True:
        if started is not None:
            code = started.exitcode
        else:
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except OSError:
                return None  # not a child of ours, or reaped by someone else
            code = None if info is None else (
                -info.si_status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else info.si_status)
        if code is not None or time.monotonic() >= deadline:
            return code
        time.sleep(0.02)


def _stop(omni, before: set[int] | None, guard: OrphanGuard, processes: list[psutil.Process] | None,
          workdir: RunFolder) -> None:
    """Shuts AsyncOmni down, ends whatever of its processes is left (nothing, normally), then removes
    the run's files (workdir, and the wake-up folders vLLM-Omni leaves in /dev/shm)."""
    if omni is not None:
        with contextlib.suppress(Exception):
            omni.shutdown()
    if processes is None:  # a failed start: whatever appeared since `before`
        processes = [p for p in psutil.Process().children(recursive=True)
                     if p.pid not in (before or set()) and p.pid != guard.watcher_pid]
    left = [p for p in processes if p.is_running()]
    if left:
        killed = terminate_tree(left, grace_s=5.0)
        if killed:
            log.warning("vLLM-Omni left %d process(es) after shutdown; killed them: %s", len(killed), killed)
    # the stages' wake-up folders go once they are gone (the resource tracker ends by itself, later)
    psutil.wait_procs([p for p in processes if not is_resource_tracker(p)], timeout=5.0)
    workdir.remove(p.pid for p in processes)
    guard.disarm()


@contextlib.contextmanager
def _ipc_sockets_in(folder: Path):
    """vLLM names its ZMQ IPC sockets `<VLLM_RPC_BASE_PATH>/<uuid>` and leaves them there (the temp
    folder by default): here they go to `folder`, removed with it."""
    old = os.environ.get("VLLM_RPC_BASE_PATH")
    os.environ["VLLM_RPC_BASE_PATH"] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("VLLM_RPC_BASE_PATH", None)
        else:
            os.environ["VLLM_RPC_BASE_PATH"] = old
