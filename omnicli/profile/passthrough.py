"""What a profile may pass raw to vLLM-Omni: an allow-list of sizes, limits, sampling and dtype knobs.

`vllm_omni.deploy_config` is merged into the deploy overlay and
`vllm_omni.stage_overrides` goes to `AsyncOmni(stage_overrides=...)`; vLLM
takes almost anything there as an engine argument, and many of those name
code or folders (`hf_config_path`, `tokenizer`, `worker_cls`, `env`,
`trust_remote_code`, a compilation `backend` given as a Python path): with the
packaged qwen3_tts.yaml's `trust_remote_code: true`, a folder's `auto_map`
module was imported into `omni synth` itself. Profiles are untrusted input
(a colleague's file, a downloaded run), so only the keys below pass: each
with the type of value it takes (numbers, booleans, a few fixed words), no
free strings, no paths. Anything else is refused with its dotted key and
the reason (docs/profiles.md lists the keys).

`check_passthrough` returns (dotted key below the section, reason) pairs;
the loader turns them into `FILE:LINE: key: reason` (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Problem = tuple[str, str]  # (dotted key relative to the checked value, reason)
Check = Callable[[Any, str], list[Problem]]

_WHY = ("not on omni's allow-list for raw vLLM-Omni keys (sizes, limits, sampling, dtypes; no paths, "
        "no code switches): see docs/profiles.md")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _join(prefix: str, key: object) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _typed(test: Callable[[Any], bool], what: str) -> Check:
    def check(value: Any, at: str) -> list[Problem]:
        return [] if test(value) else [(at, f"must be {what} (got {value!r})")]
    return check


INT = _typed(lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer")
NUM = _typed(_is_num, "a number")
BOOL = _typed(lambda v: isinstance(v, bool), "true or false")
NUMS = _typed(lambda v: isinstance(v, list) and all(_is_num(x) for x in v), "a list of numbers")
# A free-form knob: a number, a boolean, null or a list of numbers (never a string: strings name things).
SCALAR = _typed(lambda v: v is None or isinstance(v, bool) or _is_num(v)
                or (isinstance(v, list) and all(_is_num(x) for x in v)),
                "a number, true/false, null or a list of numbers")


def _one_of(*choices: Any) -> Check:
    shown = ", ".join(map(str, choices))
    return _typed(lambda v: v in choices and not isinstance(v, (dict, list)), f"one of {shown}")


def _mapping(spec: Mapping[str, Check]) -> Check:
    """A mapping whose keys are all in `spec`, each value checked by its entry."""
    def check(value: Any, at: str) -> list[Problem]:
        if not isinstance(value, dict):
            return [(at, f"must be a mapping (got {type(value).__name__})")]
        problems: list[Problem] = []
        for key, sub in value.items():
            where = _join(at, key)
            if key not in spec:
                problems.append((where, _WHY))
            else:
                problems += spec[key](sub, where)
        return problems
    return check


def _free_mapping(value_check: Check) -> Check:
    """A mapping of any identifier keys whose values all pass `value_check` (tuning knobs we do not name)."""
    def check(value: Any, at: str) -> list[Problem]:
        if not isinstance(value, dict):
            return [(at, f"must be a mapping (got {type(value).__name__})")]
        problems: list[Problem] = []
        for key, sub in value.items():
            where = _join(at, key)
            if not (isinstance(key, str) and _IDENT.match(key)):
                problems.append((where, "must be a plain name"))
            else:
                problems += value_check(sub, where)
        return problems
    return check


def _sequence(item: Check) -> Check:
    def check(value: Any, at: str) -> list[Problem]:
        if not isinstance(value, list):
            return [(at, f"must be a list (got {type(value).__name__})")]
        return [p for i, sub in enumerate(value) for p in item(sub, _join(at, i))]
    return check


DTYPE = _one_of("auto", "float32", "float", "float16", "half", "bfloat16")
RUNNER = _one_of("v1", "v2")

SAMPLING = _mapping({
    key: NUM for key in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                         "frequency_penalty")
} | {key: INT for key in ("max_tokens", "min_tokens", "seed")} | {"do_sample": BOOL})

COMPILATION = _mapping({
    "mode": INT, "level": INT,
    "backend": _one_of("inductor", "eager"),  # other values are a Python path vLLM imports
    "cudagraph_mode": _one_of("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"),
    "cudagraph_capture_sizes": NUMS, "max_cudagraph_capture_size": INT, "cudagraph_num_of_warmups": INT,
    "inductor_compile_config": _free_mapping(SCALAR),
})


def _hf_overrides(value: Any, at: str) -> list[Problem]:
    """Model-config overrides: numbers and switches only (a string could name a class or a folder),
    except MOSS's codec attention backend."""
    if not isinstance(value, dict):
        return [(at, f"must be a mapping (got {type(value).__name__})")]
    problems: list[Problem] = []
    for key, sub in value.items():
        where = _join(at, key)
        if key == "codec_attention_backend":
            problems += _one_of("sdpa", "triton", "triton_slot")(sub, where)
        elif not (isinstance(key, str) and _IDENT.match(key)):
            problems.append((where, "must be a plain name"))
        elif not (isinstance(sub, bool) or _is_num(sub)):
            problems.append((where, f"{_WHY} (hf_overrides may set numbers and true/false only; got {sub!r})"))
    return problems


# Engine keys of one stage: what `stage_overrides` may set (vLLM-Omni takes engine args only there).
ENGINE_KEYS: dict[str, Check] = {
    **{key: INT for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "kv_cache_memory_bytes",
                            "block_size", "seed", "silence_ban_frames", "num_gpu_blocks_override",
                            "max_num_partial_prefills", "long_prefill_token_threshold")},
    **{key: NUM for key in ("gpu_memory_utilization", "mm_processor_cache_gb", "swap_space", "cpu_offload_gb")},
    **{key: BOOL for key in ("enforce_eager", "async_scheduling", "enable_prefix_caching", "enable_chunked_prefill",
                             "disable_hybrid_kv_cache_manager", "skip_mm_profiling")},
    "dtype": DTYPE,
    "kv_cache_dtype": _one_of("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"),
    "compilation_config": COMPILATION,
    "hf_overrides": _hf_overrides,
}

# A `stages:` entry of deploy_config: the engine keys plus the per-stage deploy knobs.
STAGE_KEYS: dict[str, Check] = {
    **ENGINE_KEYS, "stage_id": INT, "async_chunk": BOOL, "model_runner": RUNNER,
    "default_sampling_params": SAMPLING, "subtalker_sampling_params": SAMPLING,
}

# Connector extras are tuning numbers (chunk sizes, waits, batch sizes); the one word-valued knob is named.
CONNECTOR = _mapping({"extra": _free_mapping(
    lambda v, at: _one_of("fixed", "idle_wait")(v, at) if at.endswith(".generation_coalescing_policy")
    else SCALAR(v, at))})

_TOP: dict[str, Check] = {
    "model_runner": RUNNER, "async_chunk": BOOL, "dtype": DTYPE, "enable_prefix_caching": BOOL,
    "enable_chunked_prefill": BOOL, "active_stream_window": INT,
    "speech_cache": _mapping({"resolve_max_bytes": INT, "resolve_max_entries": INT}),
    "connectors": _free_mapping(CONNECTOR),
    "stages": _sequence(_mapping(STAGE_KEYS)),
}
DEPLOY_CONFIG = _mapping({**_TOP, "platforms": _free_mapping(_mapping(_TOP))})


def _stage_overrides(value: Any, at: str) -> list[Problem]:
    if not isinstance(value, dict):
        return [(at, f"must be a mapping of stage id to engine keys (got {type(value).__name__})")]
    problems: list[Problem] = []
    for stage, keys in value.items():
        where = _join(at, stage)
        if not (isinstance(stage, str) and stage.isdigit()):
            problems.append((where, f"stage ids are written as quoted numbers, e.g. \"0\" (got {stage!r})"))
        else:
            problems += _mapping(ENGINE_KEYS)(keys, where)
    return problems


def check_passthrough(section: str, value: Any) -> list[Problem]:
    """Problems of `vllm_omni.deploy_config` (section 'deploy_config') or `vllm_omni.stage_overrides`;
    keys are dotted below the section (list items by index), e.g. '0.hf_config_path'."""
    if value is None:
        return []
    if section == "deploy_config":
        return DEPLOY_CONFIG(value, "")
    if section == "stage_overrides":
        return _stage_overrides(value, "")
    raise ValueError(f"not a passthrough section: {section}")


PASSTHROUGH_SECTIONS = ("deploy_config", "stage_overrides")
