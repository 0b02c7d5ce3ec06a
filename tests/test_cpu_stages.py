"""CPU stage choices: dtype by what the CPU can do, threads split between stages, the talker's KV cache,
and the in-process stage executor, as the deploy overlay writes them and vLLM-Omni's resolver reads them.

The capability probe is faked for both answers; one test asks the real torch under the AVX2 emulation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from omnicli.profile import load_profile
from omnicli.profile.cpu_stages import resolve_cpu_stages
from omnicli.runtime.cpu_dtype import CpuBf16, choose_dtype, split_threads

NATIVE = CpuBf16(native=True, evidence="faked: AVX512 with avx512_bf16")
AVX2 = CpuBf16(native=False, evidence="faked: AVX2")
needs_vllm_omni = pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is None, reason="vllm-omni not installed")
# Qwen3-TTS 0.6B's talker sizes (what checkpoints.py's real-size build writes).
REAL_TALKER = {"talker_config": {"num_hidden_layers": 28, "num_key_value_heads": 8, "head_dim": 128,
                                 "hidden_size": 1024, "num_attention_heads": 16}}


def test_auto_is_bfloat16_only_where_the_cpu_has_it():
    assert choose_dtype("auto", NATIVE, stage="talker").dtype == "bfloat16"
    slow = choose_dtype("auto", AVX2, stage="codec")
    assert slow.dtype == "float32" and "no native bf16" in slow.reason and slow.warning is None


def test_explicit_bfloat16_without_native_bf16_runs_with_the_measured_slowdown_as_warning():
    kept = choose_dtype("bfloat16", AVX2, stage="talker")
    assert kept.dtype == "bfloat16"
    assert kept.warning is not None and "1.3-2.5x slower" in kept.warning and "talker.dtype=auto" in kept.warning
    assert choose_dtype("bfloat16", NATIVE, stage="talker").warning is None
    assert choose_dtype("float32", NATIVE, stage="codec").dtype == "float32"  # an explicit choice stays


def test_zero_threads_split_the_cores_and_explicit_counts_stay():
    assert split_threads(0, 0, cores=2) == (1, 1)
    assert split_threads(0, 0, cores=16) == (8, 8)
    assert split_threads(0, 0, cores=3) == (2, 1)
    assert split_threads(0, 0, cores=1) == (1, 1)
    assert split_threads(3, 0, cores=8) == (3, 4)


def test_the_qwen3_cpu_preset_splits_threads_and_decides_dtypes_by_the_probe():
    p = load_profile("qwen3-tts", platform="cpu").profile
    native = resolve_cpu_stages(p, cores=2, probe=lambda: NATIVE)
    assert (native.talker.dtype, native.codec.dtype, native.talker_threads, native.codec_threads) == (
        "bfloat16", "bfloat16", 1, 1)
    plain = resolve_cpu_stages(p, cores=2, probe=lambda: AVX2)
    assert (plain.talker.dtype, plain.codec.dtype) == ("float32", "float32")
    assert "float32" in plain.describe() and plain.warnings() == []
    assert plain.as_dict()["talker_dtype"]["reason"].startswith("talker: float32")


def test_the_overlay_gives_a_float32_talker_the_kv_cache_one_sequence_needs(tmp_path):
    if importlib.util.find_spec("vllm_omni") is None:
        pytest.skip("vllm-omni not installed (the overlay reads its packaged deploy file)")
    from omnicli.vllm_omni.cpu_stage import IN_PROCESS_EXECUTOR, THREADS_KEY, apply_cpu_stages, talker_kv_bytes

    (tmp_path / "config.json").write_text(json.dumps(REAL_TALKER))
    assert talker_kv_bytes(tmp_path, "float32", 4096) == 896 << 20  # 0.875 GiB: the 0.5 GiB preset is short
    assert talker_kv_bytes(tmp_path, "bfloat16", 4096) == 448 << 20
    assert talker_kv_bytes(None, "float32", 4096) is None
    p = load_profile("qwen3-tts", platform="cpu").profile
    for probe, kv in ((lambda: AVX2, 896 << 20), (lambda: NATIVE, 1 << 29)):  # bf16 keeps the preset's 0.5 GiB
        talker, codec = {"kv_cache_memory_bytes": 1 << 29}, {}
        apply_cpu_stages(p, talker, codec, tmp_path, probe=probe)
        assert talker["kv_cache_memory_bytes"] == kv
        assert talker["distributed_executor_backend"] == codec["distributed_executor_backend"] == IN_PROCESS_EXECUTOR
        assert THREADS_KEY in talker["additional_config"] and THREADS_KEY in codec["additional_config"]


@needs_vllm_omni
def test_vllm_omni_resolves_the_overlay_to_per_stage_threads_and_the_in_process_executor(tmp_path):
    from omnicli.vllm_omni.cpu_stage import IN_PROCESS_EXECUTOR, THREADS_KEY
    from omnicli.vllm_omni.overlay import build_overlay, write_overlay
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    from vllm_omni.config import stage_config as sc
    from vllm_omni.config.pipeline_registry import OMNI_PIPELINES

    ov = build_overlay(load_profile("qwen3-tts", platform="cpu", overrides=["talker.threads=3", "codec.threads=0"]))
    deploy = sc._apply_platform_overrides(sc.load_deploy_config(write_overlay(ov, tmp_path)), "cpu")
    stages = {s.stage_id: s.yaml_engine_args for s in sc.merge_pipeline_deploy(OMNI_PIPELINES["qwen3_tts"], deploy)}
    assert stages[0]["additional_config"] == {THREADS_KEY: 3}
    assert stages[1]["additional_config"] == {THREADS_KEY: ov.cpu.codec_threads} and ov.cpu.codec_threads >= 1
    assert stages[0]["distributed_executor_backend"] == stages[1]["distributed_executor_backend"] == IN_PROCESS_EXECUTOR


@needs_vllm_omni
def test_vllm_keeps_the_in_process_executor_that_its_cpu_platform_would_replace():
    """vLLM's CPU platform turns "uni" into "mp"; the class path is left alone and names UniProcExecutor."""
    from vllm.config import ParallelConfig, VllmConfig
    from vllm.v1.executor.abstract import Executor
    from vllm.v1.executor.uniproc_executor import UniProcExecutor

    from omnicli.vllm_omni.cpu_stage import IN_PROCESS_EXECUTOR

    config = VllmConfig(parallel_config=ParallelConfig(distributed_executor_backend=IN_PROCESS_EXECUTOR))
    assert config.parallel_config.distributed_executor_backend == IN_PROCESS_EXECUTOR
    assert Executor.get_class(config) is UniProcExecutor
    assert VllmConfig(parallel_config=ParallelConfig(distributed_executor_backend="uni")
                      ).parallel_config.distributed_executor_backend == "mp"


@needs_vllm_omni
def test_the_stage_worker_sets_its_threads_from_the_overlay(monkeypatch):
    import torch

    from omnicli.vllm_omni.cpu_stage import THREADS_KEY
    from omnicli.vllm_omni.cpu_workers import _set_stage_threads

    class Config:
        additional_config = {THREADS_KEY: 1}

    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", str(before))
    try:
        assert _set_stage_threads(Config()) == 1 and torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
        Config.additional_config = {}
        assert _set_stage_threads(Config()) is None
    finally:
        torch.set_num_threads(before)


def test_the_avx2_emulation_makes_torch_answer_no_native_bf16():
    code = "from omnicli.runtime.cpu_dtype import probe_bf16; b = probe_bf16(); print(int(b.native), b.evidence)"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    native, evidence = out.stdout.strip().split(" ", 1)
    assert native == "0" and "AVX2" in evidence and "oneDNN bf16 no" in evidence


def test_the_native_engine_decides_auto_dtypes_and_zero_threads_before_it_starts():
    from omnicli.engine.engine import _stage_choices

    p = load_profile("cpu", platform="cpu", overrides=["talker.dtype=auto", "codec.dtype=auto", "talker.threads=0",
                                                       "codec.threads=0"]).profile
    expected = resolve_cpu_stages(p)  # this machine's answer
    decided, recorded = _stage_choices(p, "cpu")
    assert (decided.talker.dtype, decided.codec.dtype) == (expected.talker.dtype, expected.codec.dtype)
    threads = (decided.talker.threads, decided.codec.threads)
    assert threads == (expected.talker_threads, expected.codec_threads) and min(threads) >= 1
    assert recorded == expected.as_dict()
    on_gpu, none = _stage_choices(p, "cuda")
    assert none is None and on_gpu.codec.dtype == "float32" and on_gpu.talker.dtype == "auto"  # vLLM's choice on CUDA
    assert min(on_gpu.talker.threads, on_gpu.codec.threads) >= 1
