"""Is the talker's KV cache possible on this machine? Checked before vLLM starts.

vLLM reserves the whole CPU KV cache at start-up; one larger than the
machine's memory fails only after the model is loaded (about 17 s here),
with a 36-line traceback. This says it in one line, at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from omnicli.engine.request import EngineError

GiB = 1 << 30
# cgroup v2, then v1: a container's limit is the memory the process really has.
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory_bytes() -> int | None:
    """Physical memory, lowered to the cgroup's limit when there is one; None if unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for limit_file in _CGROUP_LIMITS:
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" or unreadable: no limit
            total = min(total, int(text))
        break
    return total


def check_kv_cache_fits(kv_cache_space_gb: float, platform: str, memory_bytes: int | None = None) -> None:
    """Raises EngineError (one line) when a CPU KV cache cannot fit in the machine's memory."""
    if platform != "cpu":
        return  # on CUDA the cache is a share of GPU memory (gpu_memory_utilization)
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    if memory is None or kv_cache_space_gb * GiB < memory:
        return
    raise EngineError(
        f"talker.kv_cache_space_gb is {kv_cache_space_gb:g} GiB but this machine has {memory / GiB:.1f} GiB of memory "
        f"in all; lower it (e.g. --set talker.kv_cache_space_gb={max(1, int(memory / GiB / 4))})"
    )
