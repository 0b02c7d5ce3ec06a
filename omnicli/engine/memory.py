"""Can the talker's KV cache and weights fit this machine? Checked before vLLM starts.

vLLM reserves the whole CPU KV cache at start-up; one larger than the
machine's memory fails only after the model is loaded (about 17 s here),
with a 36-line traceback. Weights larger than the memory (a config saying
1,000,000 layers) make its engine core grow until it is killed, with no
message at all. These checks say it in one line, at once.
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


# Bytes per parameter of each dtype a talker config or profile names ("auto": the config's own).
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8}


def talker_parameters(config: dict) -> int:
    """Parameters of a Llama/Qwen2-style decoder from its config.json (embeddings, attention, MLP, norms)."""
    def number(key: str, default: int | None = None) -> int:
        value = config.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{key} is {value!r}, not a non-negative whole number")
        return value

    hidden, layers, vocab = number("hidden_size"), number("num_hidden_layers"), number("vocab_size")
    heads = number("num_attention_heads")
    kv_heads = number("num_key_value_heads", heads)
    head_dim = number("head_dim") if config.get("head_dim") is not None else (hidden // heads if heads else 0)
    inter = number("intermediate_size")
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    per_layer = attention + 3 * hidden * inter + 2 * hidden  # gate, up, down; two norms
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", False) else 2)
    return embeddings + layers * per_layer + hidden


def check_talker_fits(config_path: Path, dtype: str, platform: str, *, kv_cache_space_gb: float = 0.0,
                      gpu_memory_utilization: float = 1.0, memory_bytes: int | None = None) -> None:
    """Raises EngineError (one line) when the talker's weights alone cannot fit the memory vLLM gets:
    checked from config.json before vLLM starts (was: the engine core grew until memory ran out)."""
    from omnicli.model_files import read_json

    config = read_json(config_path)
    config = config.get("text_config", config) if isinstance(config, dict) else config
    if not isinstance(config, dict):
        raise EngineError(f"{config_path}: not a JSON object; the file is damaged")
    try:
        params = talker_parameters(config)
    except ValueError as exc:
        raise EngineError(f"{config_path}: {exc}; the config is damaged") from None
    name = dtype if dtype != "auto" else str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    weights = params * _DTYPE_BYTES.get(name, 2)
    budget: float | None  # bytes vLLM may use; None: unknown (no GPU found), nothing to check
    if platform == "cpu":
        memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
        where, budget = "this machine has", memory
        extra = kv_cache_space_gb * GiB
    else:
        memory = gpu_memory_bytes() if memory_bytes is None else memory_bytes
        budget = None if memory is None else memory * gpu_memory_utilization
        where, extra = f"gpu_memory_utilization={gpu_memory_utilization:g} gives vLLM", 0.0
    if budget is None or weights + extra < budget:
        return
    kv = f" plus talker.kv_cache_space_gb={kv_cache_space_gb:g} GiB" if extra else ""
    raise EngineError(
        f"{config_path}: the talker has about {params / 1e9:.3g} billion parameters ({weights / GiB:.1f} GiB in "
        f"{name}){kv}, "
        f"but {where} {budget / GiB:.1f} GiB; use a smaller checkpoint or a machine with more memory"
    )


def gpu_memory_bytes() -> int | None:
    """Total memory of GPU 0 through NVML (no CUDA context in this process); None when unknown."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
