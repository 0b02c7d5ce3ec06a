"""Profiles as vLLM-Omni deploy overlays, checked against vLLM-Omni's own resolver.

The resolver pieces are vLLM-Omni's (`load_deploy_config` follows `base_config:`
into the packaged file, `_apply_platform_overrides` applies `platforms.<p>`,
`merge_pipeline_deploy` makes the per-stage engine args); no engine starts.
Importing vllm_omni takes most of this file's time (30-40 s on a loaded 2-core box).
"""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from omnicli.profile import load_profile
from omnicli.vllm_omni.overlay import GIB, build_overlay, write_overlay

needs_vllm_omni = pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is None, reason="vllm-omni not installed")
PRESETS = ("qwen3-tts", "moss-tts-local", "moss-tts-local-mrv2", "moss-tts-local-mrv2-high-concurrency",
           "moss-tts-local-mrv2-low-latency")


@pytest.fixture(scope="module")
def resolver():
    """vLLM-Omni's deploy resolution for an overlay file: (deploy config, per-stage StageConfigs)."""
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    from vllm_omni.config import stage_config as sc
    from vllm_omni.config.pipeline_registry import OMNI_PIPELINES

    def resolve(path, family: str, platform: str):
        deploy = sc._apply_platform_overrides(sc.load_deploy_config(path), platform)
        pipeline = OMNI_PIPELINES["qwen3_tts" if family == "qwen3-tts" else "moss_tts_local"]
        original = sc._apply_platform_overrides
        sc._apply_platform_overrides = lambda d, platform=None: d  # already applied for `platform`
        try:
            stages = sc.merge_pipeline_deploy(pipeline, deploy)
        finally:
            sc._apply_platform_overrides = original
        return deploy, {s.stage_id: s for s in stages}

    return resolve


def _resolved(tmp_path, resolver, preset: str, platform: str, *overrides: str):
    r = load_profile(preset, overrides=list(overrides), platform=platform)
    ov = build_overlay(
        r, codec_checkpoint=tmp_path / "audio-tokenizer" if r.profile.model == "moss-tts-local" else None
    )
    deploy, stages = resolver(write_overlay(ov, tmp_path), r.profile.model, platform)
    return r.profile, ov, deploy, stages


def _extra(deploy) -> dict:
    (connector,) = deploy.connectors.values()
    return connector["extra"]


@needs_vllm_omni
@pytest.mark.parametrize("preset", PRESETS)
def test_cpu_overlay_resolves_to_the_profile(tmp_path, resolver, preset):
    p, ov, deploy, stages = _resolved(tmp_path, resolver, preset, "cpu")
    talker, codec = stages[0].yaml_engine_args, stages[1].yaml_engine_args
    assert ov.platform == "cpu" and ov.ignored == []
    assert deploy.model_runner == "v1" and not talker["use_v2_model_runner"]
    assert talker["max_num_seqs"] == p.talker.max_num_seqs == 8
    assert codec["max_num_seqs"] == p.codec.max_num_seqs == 8
    assert talker["max_num_batched_tokens"] == p.talker.max_num_batched_tokens
    assert talker["max_model_len"] == p.talker.max_model_len
    assert talker["kv_cache_memory_bytes"] == int(p.talker.kv_cache_space_gb * GIB)
    assert codec["kv_cache_memory_bytes"] == int(p.vllm_omni.codec_kv_cache_space_gb * GIB)
    assert talker["enforce_eager"] is codec["enforce_eager"] is True
    assert talker["async_scheduling"] is codec["async_scheduling"] is False
    assert (talker["dtype"], codec["dtype"]) == (ov.cpu.talker.dtype, ov.cpu.codec.dtype)  # cpu_stage's choice
    sampling = stages[0].yaml_extras["default_sampling_params"]
    assert (sampling["temperature"], sampling["top_k"], sampling["top_p"], sampling["repetition_penalty"]) == (
        p.talker.temperature, p.talker.top_k, p.talker.top_p, p.talker.repetition_penalty)
    assert sampling["max_tokens"] == p.talker.max_new_tokens
    extra = _extra(deploy)
    assert extra["codec_chunk_frames"] == p.codec.codec_chunk_frames
    assert extra["initial_codec_chunk_frames"] == p.codec.initial_codec_chunk_frames
    assert extra["codec_chunk_ramp"] == p.codec.codec_chunk_ramp
    assert extra["generation_min_batch_size"] == p.codec.generation_min_batch_size
    assert "connector_get_max_wait" in extra  # the packaged file's own keys survive the patch
    if p.model == "moss-tts-local":
        assert stages[1].yaml_engine_args["hf_overrides"] == {
            "codec_attention_backend": "sdpa", "codec_model_name_or_path": str(tmp_path / "audio-tokenizer")}
        assert extra["generation_first_chunk_express"] is True


@needs_vllm_omni
def test_cuda_overlay_keeps_profile_values_over_the_packaged_platform_section(tmp_path, resolver):
    p, _, deploy, stages = _resolved(tmp_path, resolver, "moss-tts-local-mrv2-high-concurrency", "cuda")
    talker, codec = stages[0].yaml_engine_args, stages[1].yaml_engine_args
    assert deploy.model_runner == "v2"
    # The packaged platforms.cuda says 128 slots; the profile's 256 wins.
    assert talker["max_num_seqs"] == codec["max_num_seqs"] == p.talker.max_num_seqs == 256
    assert codec["hf_overrides"]["codec_attention_backend"] == "triton_slot"
    # The packaged mapping the overlay merged into keeps the keys we do not map...
    assert talker["hf_overrides"]["mrv2_gpu_slot_state"] is True
    assert talker["kv_cache_memory_bytes"] == 32 * GIB
    # ...and the raw passthrough reaches the stage.
    assert codec["compilation_config"]["backend"] == "inductor"
    assert codec["compilation_config"]["cudagraph_capture_sizes"][-1] == 256


@needs_vllm_omni
def test_a_key_the_pipeline_does_not_read_is_reported_and_still_written(tmp_path, resolver):
    _, ov, deploy, _ = _resolved(tmp_path, resolver, "qwen3-tts", "cpu", "codec.generation_min_batch_size=4",
                                 "codec.generation_max_wait_ms=5", "codec.codec_ring_headroom=true")
    reported = dict(ov.ignored)
    assert "Model Runner V2" in reported["codec.generation_min_batch_size"]
    assert "Model Runner V2" in reported["codec.generation_max_wait_ms"]
    assert "MOSS" in reported["codec.codec_ring_headroom"]
    extra = _extra(deploy)  # not dropped: vLLM-Omni gets them and logs its own fallback
    assert (extra["generation_min_batch_size"], extra["generation_max_wait_ms"]) == (4, 5.0)


def test_overlay_file_digest_and_passthrough(tmp_path):
    if importlib.util.find_spec("vllm_omni") is None:
        pytest.skip("vllm-omni not installed (the overlay reads its packaged deploy file)")
    r = load_profile("qwen3-tts", platform="cpu", overrides=["vllm_omni.stage_overrides={'0': {'seed': 7}}"])
    ov = build_overlay(r)
    path = write_overlay(ov, tmp_path)
    data = yaml.safe_load(path.read_text())
    assert data == ov.data and path.read_text().startswith("# vLLM-Omni deploy overlay")
    assert data["base_config"].endswith("vllm_omni/deploy/qwen3_tts.yaml")
    assert ov.stage_overrides == {"0": {"seed": 7}}
    same = build_overlay(
        load_profile("qwen3-tts", platform="cpu", overrides=["vllm_omni.stage_overrides={'0': {'seed': 7}}"])
    )
    other = build_overlay(load_profile("qwen3-tts", platform="cpu", overrides=["codec.codec_chunk_frames=24"]))
    assert ov.digest == same.digest != other.digest
    unread = load_profile("qwen3-tts", platform="cpu", overrides=["codec.layer_contexts=[4]"])
    reported = dict(build_overlay(unread).ignored)
    assert "codec.layer_contexts" in reported


@needs_vllm_omni
@pytest.mark.parametrize(("preset", "platform"),
                         [("qwen3-tts", "cpu"), ("qwen3-tts", "cuda"), ("moss-tts-local", "cpu")])
def test_no_stage_trusts_remote_code_though_the_packaged_file_says_true(tmp_path, resolver, preset, platform):
    """qwen3_tts.yaml sets trust_remote_code: true per stage; vLLM would then import the auto_map code of
    any folder a config key names. The overlay turns it off for every stage (issue 31)."""
    _, _, deploy, stages = _resolved(tmp_path, resolver, preset, platform)
    assert deploy.trust_remote_code is False
    assert [s.yaml_engine_args.get("trust_remote_code") for s in stages.values()] == [False] * len(stages)
