"""A resolved profile as a vLLM-Omni deploy overlay.

vLLM-Omni reads its settings from a deploy YAML, not from engine arguments:
`model_runner` and the connector extras (chunk sizes, coalescing) are only
accepted there. So a profile becomes an overlay file that inherits the
packaged deploy config (`base_config:` its absolute path) and patches it:
the top-level `model_runner`, the connector's `extra`, and per-stage engine
keys. Where the packaged file's own `platforms.<platform>` section would
override a key we set (vLLM-Omni applies it last), the same value is written
there too, so the profile wins on every platform.

Every mapped key is written whatever its value, so the overlay says
everything the profile decided. A key the chosen pipeline does not read
(coalescing on a V1 runner, an attention backend of another codec, a native
engine knob) is kept out of silence: `DeployOverlay.ignored` lists it with
the reason, and the engine logs it.

Nothing here imports vllm_omni: the packaged file is found on disk and read
as YAML. The overlay equals what vLLM-Omni's own resolver makes of it
(tests/test_vllm_omni_overlay.py calls that resolver).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from omnicli.atomic import write_text_atomic
from omnicli.profile.deploy_files import (  # noqa: F401 (packaged_deploy_dir, read_deploy: this module's API)
    deep_merge,
    deploy_path,
    packaged_deploy_dir,
    read_deploy,
)
from omnicli.profile.resolved import ResolvedProfile, canonical_json
from omnicli.profile.schema import CodecStageConfig, Profile, TalkerConfig
from omnicli.vllm_omni.cpu_stage import CpuStages, apply_cpu_stages
from omnicli.vllm_omni.spec import OmniFamilySpec, omni_family

OVERLAY_NAME = "deploy_overlay.yaml"
TALKER, CODEC = 0, 1  # stage ids in both pipelines
GIB = 1 << 30

# Profile keys with no counterpart in vLLM-Omni's pipelines: reported when set away from the default.
NOT_READ = {
    "codec.codec_pad_tail": "vLLM-Omni's codecs do not pad the tail chunk",
    "codec.layer_contexts": "vLLM-Omni's codecs take their attention windows from the checkpoint",
}


@dataclass(frozen=True)
class DeployOverlay:
    """The overlay for one resolved profile: file content, AsyncOmni stage_overrides, what is ignored."""

    data: dict  # the overlay YAML: base_config (absolute), model_runner, connectors, stages, platforms
    stage_overrides: dict[str, dict]  # AsyncOmni(stage_overrides=...): the profile's raw passthrough
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (dotted profile key, reason)
    platform: str = "cpu"  # the vLLM-Omni `platforms:` key the overlay was written for
    cpu: CpuStages | None = None  # a CPU run's dtype and thread choices (cpu_stage.py)

    @property
    def digest(self) -> str:
        body = canonical_json({"overlay": self.data, "stage_overrides": self.stage_overrides})
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        head = (f"# vLLM-Omni deploy overlay written by omni for platform {self.platform}; digest {self.digest}.\n"
                "# Inherits the packaged deploy config named by base_config; see docs/vllm-omni.md.\n")
        return head + yaml.safe_dump(self.data, sort_keys=False, default_flow_style=None)


def base_deploy_path(resolved: ResolvedProfile) -> Path:
    """The deploy file the overlay inherits: the profile's `vllm_omni.base_deploy_config`, else the family's."""
    p = resolved.profile
    return deploy_path(p.vllm_omni.base_deploy_config or omni_family(p.model).deploy_yaml)


def _connector_name(base: dict) -> str:
    """The connector between stage 0 and stage 1, as the packaged file names it."""
    for stage in base.get("stages") or []:
        if stage.get("stage_id") == TALKER and stage.get("output_connectors"):
            return next(iter(stage["output_connectors"].values()))
    names = list((base.get("connectors") or {}).keys())
    if len(names) != 1:
        raise ValueError(f"cannot tell the talker->codec connector among {names}")
    return names[0]


def _changed(section: str, key: str, value: Any) -> bool:
    model = TalkerConfig if section == "talker" else CodecStageConfig
    return value != model.model_fields[key].default


def build_overlay(
    resolved: ResolvedProfile, checkpoint: Path | None = None, codec_checkpoint: Path | None = None
) -> DeployOverlay:
    """The overlay for `resolved` (its platform decides the CPU requirements and `platforms:` key).

    `checkpoint`: its config sizes a CPU talker's KV cache (the pipeline itself comes from the family).
    `codec_checkpoint` (MOSS: the located audio tokenizer) replaces the one the checkpoint's config names.
    Parts: the per-stage engine keys, the connector's extras, the keys the pipeline does not read, then the
    raw passthrough and the platform section.
    """
    p = resolved.profile
    spec = omni_family(p.model)  # ValueError naming the families for any other model
    base_path = base_deploy_path(resolved)
    base = read_deploy(base_path)
    ignored: list[tuple[str, str]] = []
    talker, codec = _stage_keys(p, resolved.platform != "cuda", ignored)
    cpu = apply_cpu_stages(p, talker, codec, checkpoint) if resolved.platform != "cuda" else None
    _codec_backend(p, spec, codec, codec_checkpoint, ignored)
    extra = _connector_extra(p, spec, ignored)
    data: dict[str, Any] = {
        "base_config": str(base_path),
        "model_runner": p.talker.model_runner,
        "connectors": {_connector_name(base): {"extra": extra}},
        "stages": [{"stage_id": TALKER, **talker}, {"stage_id": CODEC, **codec}],
    }
    data = _with_passthrough(data, base, resolved.platform, dict(p.vllm_omni.deploy_config))
    _no_remote_code(data, base)
    return DeployOverlay(data=data, stage_overrides=copy.deepcopy(p.vllm_omni.stage_overrides), ignored=ignored,
                         platform=resolved.platform, cpu=cpu)


def _stage_keys(p: Profile, cpu: bool, ignored: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The talker's and the codec's engine keys (a CPU run: explicit KV caches, eager, synchronous)."""
    t, c, vo = p.talker, p.codec, p.vllm_omni
    sampling = {"temperature": t.temperature, "top_k": t.top_k, "top_p": t.top_p,
                "repetition_penalty": t.repetition_penalty, "max_tokens": t.max_new_tokens}
    talker: dict[str, Any] = {"max_num_seqs": t.max_num_seqs, "max_num_batched_tokens": t.max_num_batched_tokens,
                              "max_model_len": t.max_model_len, "default_sampling_params": sampling}
    codec: dict[str, Any] = {"max_num_seqs": c.max_num_seqs, "max_num_batched_tokens": c.max_num_batched_tokens,
                             "dtype": c.dtype}
    if t.dtype != "auto":
        talker["dtype"] = t.dtype
    if cpu:
        # No memory profiling and no graphs on our CPU platform: explicit KV caches, eager, synchronous.
        talker.update(kv_cache_memory_bytes=int(t.kv_cache_space_gb * GIB), enforce_eager=True, async_scheduling=False)
        codec.update(kv_cache_memory_bytes=int(vo.codec_kv_cache_space_gb * GIB), enforce_eager=True,
                     async_scheduling=False)
        if not t.enforce_eager:
            ignored.append(("talker.enforce_eager", "the CPU platform runs every stage eagerly"))
        if t.cudagraph_capture_sizes is not None:
            ignored.append(("talker.cudagraph_capture_sizes", "no CUDA graphs on CPU"))
        if c.capture_sizes is not None:
            ignored.append(("codec.capture_sizes", "no CUDA graphs on CPU"))
        return talker, codec
    talker.update(gpu_memory_utilization=t.gpu_memory_utilization, enforce_eager=t.enforce_eager)
    if t.cudagraph_capture_sizes is not None:
        talker["compilation_config"] = {"cudagraph_capture_sizes": t.cudagraph_capture_sizes}
    if c.capture_sizes is not None:
        codec["compilation_config"] = {"cudagraph_capture_sizes": c.capture_sizes}
    if t.kv_cache_space_gb != TalkerConfig.model_fields["kv_cache_space_gb"].default:
        ignored.append(("talker.kv_cache_space_gb", "on CUDA the KV cache comes from gpu_memory_utilization "
                        "or the deploy file's kv_cache_memory_bytes"))
    return talker, codec


def _codec_backend(p: Profile, spec: OmniFamilySpec, codec: dict[str, Any], codec_checkpoint: Path | None,
                   ignored: list[tuple[str, str]]) -> None:
    """MOSS's codec attention backend and audio tokenizer go into the codec stage's hf_overrides."""
    c = p.codec
    if spec.codec_backend_in_hf_overrides:
        if c.codec_attention_backend == "slot":
            ignored.append(("codec.codec_attention_backend", "slot is the native codec's; MOSS's codec uses sdpa here "
                            "(its backends: sdpa, triton, triton_slot)"))
        else:
            codec["hf_overrides"] = {"codec_attention_backend": c.codec_attention_backend}
        if codec_checkpoint is not None:  # read by MOSS's codec stage before audio_tokenizer_name_or_path
            codec.setdefault("hf_overrides", {})["codec_model_name_or_path"] = str(codec_checkpoint)
    elif _changed("codec", "codec_attention_backend", c.codec_attention_backend):
        ignored.append(("codec.codec_attention_backend", "Qwen3-TTS's Code2Wav has one attention implementation"))


def _connector_extra(p: Profile, spec: OmniFamilySpec, ignored: list[tuple[str, str]]) -> dict[str, Any]:
    """The talker->codec connector's extras (chunk geometry, batch waiting); notes the keys not read."""
    t, c = p.talker, p.codec
    extra: dict[str, Any] = {
        "codec_chunk_frames": c.codec_chunk_frames,
        "initial_codec_chunk_frames": c.initial_codec_chunk_frames,
        "codec_chunk_ramp": c.codec_chunk_ramp,
        "generation_min_batch_size": c.generation_min_batch_size,
        "generation_max_wait_ms": c.generation_max_wait_ms,
        "generation_coalescing_policy": c.generation_coalescing_policy,
        "codec_ring_headroom": int(c.codec_ring_headroom),
    }
    if c.codec_chunk_ramp is not None and len(c.codec_chunk_ramp) < 2:
        ignored.append(("codec.codec_chunk_ramp", "vLLM-Omni disables a ramp of fewer than 2 entries; "
                        "use initial_codec_chunk_frames"))
    if c.codec_ring_headroom and not spec.codec_ring_caches:
        ignored.append(("codec.codec_ring_headroom", "only MOSS-TTS-Local's codec keeps ring caches"))
    if t.model_runner != "v2" and c.generation_min_batch_size > 1 and c.generation_max_wait_ms > 0:
        for key in ("generation_min_batch_size", "generation_max_wait_ms"):
            ignored.append((f"codec.{key}", "batch waiting requires Model Runner V2 (talker.model_runner: v2); "
                            "vLLM-Omni schedules the codec without waiting on V1"))
    if t.model_runner != "v2" and c.generation_coalescing_policy != "fixed":
        ignored.append(("codec.generation_coalescing_policy", "batch waiting requires Model Runner V2"))
    for dotted, reason in NOT_READ.items():
        section, key = dotted.split(".")
        if _changed(section, key, getattr(t if section == "talker" else c, key)):
            ignored.append((dotted, reason))
    return extra


def _with_passthrough(data: dict[str, Any], base: dict, platform: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`vllm_omni.deploy_config` merged over the mapped keys, then the platform section over both."""
    if "base_config" in raw:
        raise ValueError("vllm_omni.deploy_config cannot set base_config: use vllm_omni.base_deploy_config")
    raw_platforms = raw.pop("platforms", None)
    data = deep_merge(data, raw)  # the raw passthrough wins over mapped keys...
    stages = {s["stage_id"]: s for s in data["stages"]}
    platform_patch = _platform_patch(base, platform, data["model_runner"], stages)  # ...on every platform
    if platform_patch:
        data["platforms"] = {platform: platform_patch}
    if raw_platforms:
        data["platforms"] = deep_merge(data.get("platforms") or {}, raw_platforms)
    return data


def _no_remote_code(data: dict[str, Any], base: dict) -> None:
    """`trust_remote_code: false` at the top, in every stage and in every platform section the overlay
    or the inherited file has: the packaged qwen3_tts.yaml sets it true per stage, and with it vLLM
    imports the `auto_map` code of any folder a config key names. omni never runs code from a folder
    (the engine also passes trust_remote_code=False to AsyncOmni, which outranks every deploy key)."""
    data["trust_remote_code"] = False
    ids = [s.get("stage_id") for s in data["stages"]]
    for stage in base.get("stages") or []:
        if isinstance(stage, dict) and stage.get("stage_id") not in ids:
            data["stages"].append({"stage_id": stage.get("stage_id")})
            ids.append(stage.get("stage_id"))
    for stage in data["stages"]:
        stage["trust_remote_code"] = False
    # A platform section is applied after the stages: patch each inherited one that names the key.
    for name, packaged in (base.get("platforms") or {}).items():
        if not isinstance(packaged, dict) or "trust_remote_code" not in str(packaged):
            continue
        section = data.setdefault("platforms", {}).setdefault(name, {})
        section["trust_remote_code"] = False
        for entry in packaged.get("stages") or []:
            if isinstance(entry, dict) and "trust_remote_code" in str(entry):
                ours = next((s for s in section.setdefault("stages", []) if s.get("stage_id") == entry.get("stage_id")),
                            None)
                if ours is None:
                    ours = {"stage_id": entry.get("stage_id")}
                    section["stages"].append(ours)
                ours["trust_remote_code"] = False
                if isinstance(entry.get("engine_args"), dict):
                    ours.setdefault("engine_args", {})["trust_remote_code"] = False


def _platform_patch(base: dict, platform: str, runner: str, stages: dict[int, dict]) -> dict:
    """What the packaged `platforms.<platform>` would set over our keys, set to our values there too.

    vLLM-Omni applies that section after the stages and replaces a mapping it names whole
    (`hf_overrides`, `compilation_config`): ours are merged into the packaged mapping, so keys we do
    not map (e.g. `mrv2_gpu_slot_state`) survive.
    """
    section = (base.get("platforms") or {}).get(platform) or {}
    patch: dict[str, Any] = {}
    if "model_runner" in section:
        patch["model_runner"] = runner
    for entry in section.get("stages") or []:
        ours = stages.get(entry.get("stage_id"))
        if ours is None:
            continue
        values = entry.get("engine_args", entry)  # the nested layout keeps engine keys under engine_args
        common = {}
        for key, value in ours.items():
            if key in values and key != "stage_id":
                common[key] = deep_merge(values[key], value) if isinstance(value, dict) else value
        if common:
            patch.setdefault("stages", []).append({"stage_id": entry["stage_id"], **common})
    return patch


def write_overlay(overlay: DeployOverlay, dest_dir: Path) -> Path:
    """Writes dest_dir/deploy_overlay.yaml whole or not at all; returns its path."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / OVERLAY_NAME
    write_text_atomic(path, overlay.to_yaml())
    return path


def record_overlay(overlay: DeployOverlay, run_dir: Path) -> dict:
    """Writes the overlay into a run folder; returns what results record about it."""
    path = write_overlay(overlay, run_dir)
    return {"path": str(path), "digest": overlay.digest, "platform": overlay.platform,
            "stage_overrides": overlay.stage_overrides, "ignored": [f"{k}: {why}" for k, why in overlay.ignored]}


def describe(overlay: DeployOverlay) -> str:
    """One line for logs and `omni profiles show`."""
    return json.dumps({"digest": overlay.digest, "base_config": overlay.data.get("base_config"),
                       "ignored": [k for k, _ in overlay.ignored]})
