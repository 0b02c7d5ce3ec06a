"""vLLM-Omni's stage workers on vLLM's CPU worker (used through platform.CpuOmniPlatform).

Each worker is vLLM's `CPUWorker` (CPU device, threads, explicit KV cache)
whose model runner is vLLM-Omni's (AR talker or generation codec) composed
with vLLM's `CPUModelRunner` (host tensors in place of device buffers). The
composition is by inheritance: vLLM-Omni's runner methods first, the CPU
runner's device handling below them.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm_omni.worker.gpu_ar_model_runner import GPUARModelRunner
from vllm_omni.worker.gpu_generation_model_runner import GPUGenerationModelRunner
from vllm_omni.worker.mixins import OmniWorkerMixin


class CpuARModelRunner(GPUARModelRunner, CPUModelRunner):
    """The talker stage's runner (code predictor inside the step)."""

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        super().load_model(*args, **kwargs)
        if isinstance(self.dtype, torch.dtype):  # vLLM has resolved "auto" by now
            align_embedding_dtype(self.model, self.dtype)


def align_embedding_dtype(model: torch.nn.Module, dtype: torch.dtype) -> list[str]:
    """Makes the talker build its step embeddings in the model's dtype; returns the modules changed.

    vLLM-Omni's Qwen3-TTS talker (and its prompt builder) fix their embedding dtype at bfloat16
    (`_embedding_dtype`, the CUDA default), while the runner's `inputs_embeds` buffer is in the model
    dtype. The runner's `copy_` casts, but its batched decode path `index_copy_`s the talker's
    embeddings into that buffer, which needs equal dtypes: a float32 talker died at the first decode
    step that several requests shared. In the model dtype both agree, whatever the profile says.
    """
    changed = []
    for name, module in model.named_modules():
        owners: list[tuple[Any, str]] = [(module, name or "model")]
        builder = getattr(module, "_prompt_builder", None)
        if builder is not None:
            owners.append((builder, f"{name}._prompt_builder"))
        for owner, label in owners:
            current = getattr(owner, "_embedding_dtype", None)
            if isinstance(current, torch.dtype) and current != dtype:
                owner._embedding_dtype = dtype
                changed.append(label)
    return changed


class CpuGenerationModelRunner(GPUGenerationModelRunner, CPUModelRunner):
    """The Code2Wav stage's runner."""


class _CpuOmniWorker(OmniWorkerMixin, CPUWorker):
    model_runner_cls: type

    def init_device(self):
        _set_stage_threads(self.vllm_config)  # before vLLM's CPU worker disables torch.set_num_threads
        super().init_device()  # CPU device, distributed group, seed, and a plain CPU runner
        if self.use_v2_model_runner:  # Model Runner V2 needs Triton: the deploy overlay keeps CPU on v1
            raise RuntimeError("vLLM-Omni on CPU runs the V1 model runner only: set model_runner: v1 (platforms.cpu)")
        # vLLM leaves this None on CPU (no CUDA graphs); vLLM-Omni's talker takes max() over it.
        if self.vllm_config.compilation_config.max_cudagraph_capture_size is None:
            self.vllm_config.compilation_config.max_cudagraph_capture_size = 0
        self.model_runner = self.model_runner_cls(self.vllm_config, self.device)


def _set_stage_threads(vllm_config: Any) -> int | None:
    """This stage's OpenMP/torch threads, from the overlay (cpu_stage.THREADS_KEY); None when it names none.

    The deploy overlay gives each stage its share of the cores; without it every stage process would
    run one thread per core and the stages would stall each other."""
    from omnicli.vllm_omni.cpu_stage import THREADS_KEY

    threads = (getattr(vllm_config, "additional_config", None) or {}).get(THREADS_KEY)
    if not threads:
        return None
    os.environ["OMP_NUM_THREADS"] = str(threads)  # for OpenMP runtimes started after this point
    torch.set_num_threads(int(threads))
    return int(threads)


class CpuARWorker(_CpuOmniWorker):
    model_runner_cls = CpuARModelRunner


class CpuGenerationWorker(_CpuOmniWorker):
    model_runner_cls = CpuGenerationModelRunner
