"""vLLM-Omni's stage workers on vLLM's CPU worker (used through platform.CpuOmniPlatform).

Each worker is vLLM's `CPUWorker` (CPU device, threads, explicit KV cache)
whose model runner is vLLM-Omni's (AR talker or generation codec) composed
with vLLM's `CPUModelRunner` (host tensors in place of device buffers). The
composition is by inheritance: vLLM-Omni's runner methods first, the CPU
runner's device handling below them.
"""

from __future__ import annotations

from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm_omni.worker.gpu_ar_model_runner import GPUARModelRunner
from vllm_omni.worker.gpu_generation_model_runner import GPUGenerationModelRunner
from vllm_omni.worker.mixins import OmniWorkerMixin


class CpuARModelRunner(GPUARModelRunner, CPUModelRunner):
    """The talker stage's runner (code predictor inside the step)."""


class CpuGenerationModelRunner(GPUGenerationModelRunner, CPUModelRunner):
    """The Code2Wav stage's runner."""


class _CpuOmniWorker(OmniWorkerMixin, CPUWorker):
    model_runner_cls: type

    def init_device(self):
        super().init_device()  # CPU device, distributed group, seed, and a plain CPU runner
        if self.use_v2_model_runner:  # Model Runner V2 needs Triton: the deploy overlay keeps CPU on v1
            raise RuntimeError("vLLM-Omni on CPU runs the V1 model runner only: set model_runner: v1 (platforms.cpu)")
        # vLLM leaves this None on CPU (no CUDA graphs); vLLM-Omni's talker takes max() over it.
        if self.vllm_config.compilation_config.max_cudagraph_capture_size is None:
            self.vllm_config.compilation_config.max_cudagraph_capture_size = 0
        self.model_runner = self.model_runner_cls(self.vllm_config, self.device)


class CpuARWorker(_CpuOmniWorker):
    model_runner_cls = CpuARModelRunner


class CpuGenerationWorker(_CpuOmniWorker):
    model_runner_cls = CpuGenerationModelRunner
