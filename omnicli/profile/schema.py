"""The profile schema: every engine setting, its type, range and default.

Pydantic models in strict mode (a quoted "32" is not an int, 1 is not a bool)
and `extra="forbid"`. Cross-field rules that need no platform live here;
platform rules (CUDA-only features) live in `check_platform`.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, validate_default=False)


def _positive_items(name: str, values: Optional[list[int]]) -> Optional[list[int]]:
    if values is None:
        return None
    if not values:
        raise ValueError(f"{name} must not be empty (use null for the default)")
    bad = [v for v in values if v < 1]
    if bad:
        raise ValueError(f"every entry of {name} must be >= 1")
    return values


class TalkerConfig(BaseModel):
    """Stage 0: the autoregressive talker LM, run by vLLM."""

    model_config = _STRICT

    model_runner: Literal["v1", "v2"] = Field(
        "v1", description="vLLM model runner; v2 is vLLM's Model Runner V2 (CUDA only)."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Talker weight/activation dtype ('auto': on CPU bfloat16 where the CPU has native bf16, "
        "float32 elsewhere; on CUDA vLLM's choice)."
    )
    max_num_seqs: int = Field(64, ge=1, description="Most sequences vLLM schedules at once.")
    max_num_batched_tokens: int = Field(
        8192, ge=1,
        description="Token budget of one vLLM scheduler step (on CPU, below max_model_len: the engine's prefill gate, "
                    "prompt tokens awaiting prefill at once).",
    )
    max_model_len: int = Field(4096, ge=64, description="Context length: prompt plus generated tokens.")
    max_new_tokens: int = Field(2048, ge=1, description="Default cap on generated talker tokens per request.")
    kv_cache_space_gb: float = Field(
        1.0, gt=0, description="CPU KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE)."
    )
    gpu_memory_utilization: float = Field(
        0.5, gt=0, le=1, description="Share of GPU memory vLLM may use (CUDA)."
    )
    enforce_eager: bool = Field(True, description="Disable CUDA graphs / torch.compile in vLLM.")
    cudagraph_capture_sizes: Optional[list[int]] = Field(
        None, description="Batch sizes vLLM captures CUDA graphs for (null: vLLM default)."
    )
    threads: int = Field(
        1, ge=0, description="CPU threads of the talker process (0: the larger half of the machine's cores)."
    )
    temperature: float = Field(0.9, ge=0, description="Sampling temperature (0: greedy).")
    top_k: int = Field(50, description="Top-k sampling (-1: off).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    repetition_penalty: float = Field(1.0, gt=0, description="vLLM repetition penalty (1.0: off).")

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, v: int) -> int:
        if v != -1 and v < 1:
            raise ValueError("top_k must be -1 (off) or >= 1")
        return v

    @field_validator("cudagraph_capture_sizes")
    @classmethod
    def _capture(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        return _positive_items("cudagraph_capture_sizes", v)


class CodecStageConfig(BaseModel):
    """Stage 1: the streaming codec decoder and its generation scheduler."""

    model_config = _STRICT

    codec_attention_backend: Literal["sdpa", "slot", "triton", "triton_slot"] = Field(
        "sdpa",
        description="Codec attention: sdpa (gather + PyTorch SDPA), slot (in-place on the rings), triton (CUDA only); "
        "triton_slot: vLLM-Omni's MOSS codec on CUDA only.",
    )
    dtype: Literal["auto", "float32", "float64", "bfloat16", "float16"] = Field(
        "float32", description="Codec decoder dtype ('auto': as talker.dtype's 'auto')."
    )
    max_num_seqs: int = Field(64, ge=1, description="Request slots of the codec stage.")
    max_num_batched_tokens: int = Field(
        4096, ge=1, description="Per-step budget of the codec scheduler, in codec frames."
    )
    capture_sizes: Optional[list[int]] = Field(
        None, description="Batch sizes a step is padded up to (sorted ascending, unique); null: no padding."
    )
    generation_min_batch_size: int = Field(
        1, ge=1, description="Coalescing target: wait for this many ready requests (1..max_num_seqs)."
    )
    generation_max_wait_ms: float = Field(
        0.0, ge=0, description="Coalescing window in ms, measured from the first waiting arrival (0: off)."
    )
    generation_coalescing_policy: Literal["fixed", "idle_wait"] = Field(
        "fixed", description="fixed: poll within the window; idle_wait: block on the inbox when nothing is runnable."
    )
    codec_chunk_frames: int = Field(25, ge=1, description="Frames per chunk after the first.")
    initial_codec_chunk_frames: int = Field(5, ge=1, description="Frames in the first chunk of a request.")
    codec_chunk_ramp: Optional[list[int]] = Field(
        None, description="Sizes of the first chunks, replacing initial_codec_chunk_frames (e.g. [1, 4, 15])."
    )
    codec_ring_headroom: bool = Field(
        False, description="Size rings as context + max chunk so chunked decoding equals whole-sequence decoding."
    )
    codec_pad_tail: bool = Field(False, description="Pad the terminal tail chunk to the steady chunk size.")
    layer_contexts: Optional[list[int]] = Field(
        None, description="Per-layer attention window in frames (null: the model's default)."
    )
    threads: int = Field(1, ge=0, description="torch threads of the codec stage (0: half the machine's cores).")

    @field_validator("capture_sizes")
    @classmethod
    def _capture(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        v = _positive_items("capture_sizes", v)
        if v is not None and any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("capture_sizes must be sorted ascending without repeats")
        return v

    @field_validator("codec_chunk_ramp")
    @classmethod
    def _ramp(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        return _positive_items("codec_chunk_ramp", v)

    @field_validator("layer_contexts")
    @classmethod
    def _contexts(cls, v: Optional[list[int]]) -> Optional[list[int]]:
        return _positive_items("layer_contexts", v)

    @model_validator(mode="after")
    def _min_batch_fits_slots(self) -> CodecStageConfig:
        if self.generation_min_batch_size > self.max_num_seqs:
            # ctx["key"] lets the loader point the error at the right key.
            raise PydanticCustomError(
                "min_batch_over_slots",
                "generation_min_batch_size ({n}) must be <= codec.max_num_seqs ({slots}): "
                "the coalescing target cannot exceed the request slots",
                {"key": "generation_min_batch_size", "n": self.generation_min_batch_size, "slots": self.max_num_seqs},
            )
        return self


class RetentionConfig(BaseModel):
    """Thresholds that classify delivered audio as suspect (see docs/metrics.md)."""

    model_config = _STRICT

    near_silent_dbfs: float = Field(-60.0, description="Audio whose RMS is below this (dBFS) is near_silent.")
    clipped_share: float = Field(
        0.01, ge=0, le=1, description="Share of samples at full scale (|x| >= 0.999) above which audio is clipped."
    )
    too_long_s_per_char: float = Field(
        0.5, gt=0, description="too_long when duration > max(too_long_min_s, this * len(text))."
    )
    too_long_min_s: float = Field(10.0, ge=0, description="Floor of the too_long duration limit, in seconds.")
    asr_wer_threshold: float = Field(0.5, ge=0, description="eval-wer retains audio whose WER exceeds this.")
    sim_threshold: float = Field(
        0.75, ge=-1, le=1,
        description="omni eval retains audio (low_sim) whose speaker similarity is below this; the scale depends on "
        "the SIM backend (0.75 suits the bundled d-vector, about 0.5 a WavLM checkpoint).",
    )
    mos_threshold: float = Field(
        3.0, ge=1, le=5, description="omni eval retains audio (low_mos) whose DNSMOS OVRL (or UTMOS) is below this."
    )

    def too_long_limit_s(self, text: str) -> float:
        return max(self.too_long_min_s, self.too_long_s_per_char * len(text))


class VllmOmniConfig(BaseModel):
    """vLLM-Omni families only: the deploy config the overlay builds on, and raw passthroughs."""

    model_config = _STRICT

    base_deploy_config: Optional[str] = Field(
        None,
        description="Packaged deploy file (e.g. moss_tts_local.yaml) or a path the overlay inherits; null: the "
                    "family's default.",
    )
    deploy_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Raw deploy-YAML keys merged into the overlay last (anything the profile does not map).",
    )
    stage_overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Raw per-stage engine args for AsyncOmni(stage_overrides=...), keyed by stage id.",
    )
    codec_kv_cache_space_gb: float = Field(
        0.25, gt=0, description="CPU KV cache size of the codec stage in GiB (vLLM-Omni skips memory profiling on CPU)."
    )


class Profile(BaseModel):
    """Every engine setting. Build one through `load_profile`."""

    model_config = _STRICT

    model: str = Field("omni-tiny", description="Model family to run (`omni models list`).")
    model_path: Optional[str] = Field(
        None,
        description="Talker checkpoint: a folder or a Hugging Face repo id in the local HF cache (null: the "
                    "family's published repo).",
    )
    codec_path: Optional[str] = Field(
        None,
        description="Codec checkpoint: a folder or a Hugging Face repo id in the local HF cache (null: the "
                    "family's published repo).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto: CUDA when a GPU is usable, else CPU; cpu/cuda force it."
    )
    seed: int = Field(0, description="Seed for sampling and for building omni-tiny.")
    stage_timeout_s: float = Field(
        120.0, gt=0, description="A stage that makes no progress this long is reported as hung."
    )
    talker: TalkerConfig = Field(default_factory=TalkerConfig, description="Stage 0 (vLLM talker).")
    codec: CodecStageConfig = Field(default_factory=CodecStageConfig, description="Stage 1 (streaming codec).")
    retention: RetentionConfig = Field(default_factory=RetentionConfig, description="Suspect-audio thresholds.")
    vllm_omni: VllmOmniConfig = Field(default_factory=VllmOmniConfig, description="vLLM-Omni deploy overlay options.")
    model_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form options of the model adapter. Replaced whole when overlaid, never merged.",
    )

    @field_validator("model")
    @classmethod
    def _registered_family(cls, name: str) -> str:
        from omnicli.families import get_family

        get_family(name)  # UnknownFamily (a ValueError) with did-you-mean
        return name


# Stage/section name -> model; `model_options` is deliberately absent (free-form).
SECTIONS: dict[str, type[BaseModel]] = {
    "talker": TalkerConfig, "codec": CodecStageConfig, "retention": RetentionConfig, "vllm_omni": VllmOmniConfig,
}
# Mappings an overlay replaces whole instead of merging key by key.
REPLACED_WHOLE = frozenset({"model_options"})


def check_platform(profile: Profile | dict, platform: str) -> list[tuple[str, str]]:
    """(dotted key, reason) for each setting the platform cannot run. Takes a
    raw settings dict too, so these are reported alongside schema errors."""
    data = profile.model_dump() if isinstance(profile, Profile) else profile
    talker, codec = data.get("talker") or {}, data.get("codec") or {}
    problems = []
    if platform != "cuda" and isinstance(talker, dict) and talker.get("model_runner") == "v2":
        problems.append((
            "talker.model_runner",
            f"model_runner v2 (vLLM Model Runner V2) needs CUDA; this machine's platform is {platform}: "
            "use model_runner: v1",
        ))
    backend = codec.get("codec_attention_backend") if isinstance(codec, dict) else None
    if platform != "cuda" and backend in ("triton", "triton_slot"):
        problems.append((
            "codec.codec_attention_backend",
            f"codec_attention_backend {backend} needs CUDA; this machine's platform is {platform}: "
            "use sdpa or slot",
        ))
    return problems
