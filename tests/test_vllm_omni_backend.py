"""The vLLM-Omni backend without an engine: install gating, our CPU platform plugin, the import
stand-ins, and our requests checked against vLLM-Omni's own Qwen3-TTS serving adapter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli import families
from omnicli.cli import app
from tests.conftest import DEMO_MANIFEST

runner = CliRunner()


def test_without_vllm_omni_a_qwen3_profile_is_a_usage_error_naming_the_install(monkeypatch, tmp_path):
    real = families.module_exists
    monkeypatch.setattr(families, "module_exists", lambda name: name != "vllm_omni" and real(name))
    result = runner.invoke(
        app, ["synth", str(DEMO_MANIFEST), "--out", str(tmp_path / "out"), "--set", "model=qwen3-tts"]
    )
    assert result.exit_code == 2, result.output
    assert "pip install --no-deps vllm-omni==0.32.0rc1" in " ".join(result.output.split())
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_the_families_register_without_importing_vllm_omni():
    code = (
        "import sys; from omnicli.families import get_family; f = get_family('qwen3-tts'); m = "
        "get_family('moss-tts-local');"
        "print(f.engine, m.engine, f.requires, 'vllm_omni' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["vllm-omni", "vllm-omni", "('vllm_omni',)", "False", "False"]


def test_our_cpu_platform_is_registered_and_answers_only_where_vllm_runs_on_the_cpu(monkeypatch):
    pytest.importorskip("vllm_omni")
    from vllm.platforms import current_platform

    from omnicli.vllm_omni import platform

    (ep,) = [e for e in entry_points(group="vllm_omni.platform_plugins") if e.name == "omnicli_cpu"]
    assert ep.load() is platform.cpu_platform_plugin
    assert platform.cpu_platform_plugin() == (
        "omnicli.vllm_omni.platform.CpuOmniPlatform" if current_platform.is_cpu() else None
    )
    monkeypatch.setattr(type(current_platform), "is_cpu", lambda self: False)  # a GPU machine: vLLM-Omni's own platform
    assert platform.cpu_platform_plugin() is None


def run_python(code: str, *, extra_path: Path | None = None) -> str:
    """`code` in a fresh interpreter, without the stand-ins an engine test of this session may have put on
    PYTHONPATH."""
    from omnicli.vllm_omni.shims import SHIM_DIR

    env_code = (f"import sys; sys.path.insert(0, {str(extra_path)!r})\n" if extra_path else "") + textwrap.dedent(code)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and not p.startswith(str(SHIM_DIR))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_the_stand_ins_fill_only_missing_packages_and_fail_clearly_when_used(tmp_path):
    fake = tmp_path / "site"
    (fake / "torchvision").mkdir(parents=True)
    (fake / "torchvision" / "__init__.py").write_text("REAL = True\n")
    out = run_python("""
        import importlib.util, os
        from omnicli.vllm_omni.shims import install_import_shims
        print(install_import_shims())
        import torchvision, torchaudio
        print(getattr(torchvision, "REAL", False), torchaudio.__version__)
        try:
            torchaudio.compliance.kaldi.fbank(None)
        except ModuleNotFoundError as exc:
            print("raised", "torchaudio.compliance.kaldi.fbank is not available" in str(exc))
        print("for_torchaudio" in os.environ["PYTHONPATH"], "for_torchvision" in os.environ["PYTHONPATH"])
    """, extra_path=fake)
    assert out.split("\n")[:4] == ["['torchaudio']", "True 0.0.0+omnicli.shim", "raised True", "True False"]


def test_the_torchvision_stand_in_answers_any_submodule_with_placeholders():
    out = run_python("""
        import importlib.util
        if importlib.util.find_spec("torchvision") is not None:
            print("real torchvision installed"); raise SystemExit
        from omnicli.vllm_omni.shims import install_import_shims, stood_in
        install_import_shims()
        from torchvision.transforms.v2 import functional as tvF
        from torchvision.io import ImageReadMode, decode_image
        class Sub(ImageReadMode): pass  # a base class at import time still works
        try:
            tvF.resize(None, 3)
        except ModuleNotFoundError as exc:
            print("raised", str(exc).startswith("torchvision.transforms.v2.functional.resize is not available"))
        print(sorted(stood_in()))
    """)
    if out.startswith("real torchvision"):
        pytest.skip("a real torchvision is installed")
    assert out.split("\n")[:2] == ["raised True", "['torchaudio', 'torchvision']"]


def test_the_stand_in_mel_filterbank_matches_librosa_and_resampling_keeps_the_duration():
    pytest.importorskip("librosa")
    out = run_python("""
        import importlib.util
        if importlib.util.find_spec("torchaudio") is not None:
            print("real"); raise SystemExit
        import numpy as np, librosa, torch
        from omnicli.vllm_omni.shims import install_import_shims
        install_import_shims()
        from torchaudio.functional import melscale_fbanks, resample
        from torchaudio.transforms import Resample
        for sr, n_fft, n_mels, fmin, fmax in [(24000, 1024, 128, 0, 12000), (16000, 512, 80, 20, 7600)]:
            ours = melscale_fbanks(n_freqs=n_fft // 2 + 1, f_min=fmin, f_max=fmax, n_mels=n_mels, sample_rate=sr,
                                   mel_scale="slaney", norm="slaney").T.numpy()
            ref = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)
            print(f"{np.max(np.abs(ours - ref)) / np.max(ref):.2e}")
        htk = melscale_fbanks(201, 0.0, 8000.0, 40, 16000).T.numpy()
        ref = librosa.filters.mel(sr=16000, n_fft=400, n_mels=40, fmin=0, fmax=8000, htk=True, norm=None)
        print(f"{np.max(np.abs(htk - ref)):.2e}")
        x = torch.randn(2, 16000)
        print(tuple(resample(x, 16000, 24000).shape), tuple(Resample(16000, 48000)(x).shape), resample(x, 8, 8) is x)
    """)
    if out.startswith("real"):
        pytest.skip("a real torchaudio is installed")
    slaney_a, slaney_b, htk, shapes = out.split("\n")[:4]
    assert float(slaney_a) < 1e-4 and float(slaney_b) < 1e-4 and float(htk) < 1e-5
    assert shapes == "(2, 24000) (2, 48000) True"


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory):
    pytest.importorskip("vllm_omni")
    from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    root = tmp_path_factory.mktemp("qwen3")
    return {
        kind: build_tiny_qwen3_tts(root / kind, seed=0, kind=kind) and root / kind
        for kind in ("base", "custom_voice", "voice_design")
    }


@pytest.mark.parametrize("kind", ["base", "custom_voice", "voice_design"])
def test_verify_matches_vllm_omnis_serving_adapter_for_each_task_type(tiny_checkpoints, kind):
    from omnicli.parity.qwen3_tts import run

    checks = run(tiny_checkpoints[kind])
    by_status = {s: [c for c in checks if c.status == s] for s in ("ok", "mismatch", "skipped")}
    assert not by_status["mismatch"], [(c.name, c.figure, c.detail) for c in by_status["mismatch"]]
    names = [c.name for c in checks]
    want = {
        "base": ["Base in-context clone", "Base x-vector only (no transcript)", "Base with a max_new_tokens cap"],
        "custom_voice": ["CustomVoice voice ryan", "CustomVoice default voice"],
        "voice_design": ["VoiceDesign instruction"],
    }[kind]
    for case in want:
        assert f"{case}: placeholder prompt length" in names and f"{case}: stage-0 sampling" in names
    assert names[:2] == ["stage-0 default sampling (our overlay vs the server's deploy file)",
                         "codec budgets per task (talker additional_config)"]
    if kind == "base":
        assert [c.name for c in by_status["skipped"]] == ["Base with a max_new_tokens cap: a length finish"]
        assert "16 kHz reference resampled to 24 kHz" in names
    else:
        assert not by_status["skipped"]


def test_verify_command_prints_each_check_with_its_figure(tiny_checkpoints):
    result = runner.invoke(
        app, ["models", "verify", "qwen3-tts", "--checkpoint", str(tiny_checkpoints["custom_voice"])]
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "OK CustomVoice voice ryan: placeholder prompt length: " in text and "10 ok, 0 mismatched, 0 skipped" in text


def test_verify_fails_where_our_side_differs_from_the_servers_deploy_file(tiny_checkpoints, tmp_path, monkeypatch):
    """No check passes by construction: a deploy file whose stage 0 sets a temperature, a seed and its
    own codec budgets, with our budgets replaced by vLLM-Omni's defaults (a hard-coded table would be)."""
    import yaml
    from vllm_omni.entrypoints.openai.tts_adapters.qwen3_tts import load_codec_budgets

    from omnicli.parity.qwen3_tts import run
    from omnicli.profile.deploy_files import deploy_path
    from omnicli.vllm_omni import requests

    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(yaml.safe_dump({"base_config": str(deploy_path("qwen3_tts.yaml")), "stages": [{
        "stage_id": 0, "default_sampling_params": {"temperature": 0.5, "seed": 11},
        "additional_config": {"codec_budget_frames_per_text_token": {"Base": 2}, "codec_budget_min_frames": 77}}]}))
    monkeypatch.setattr(requests, "codec_budgets", lambda _stages: load_codec_budgets(None))
    checks = {c.name: c for c in run(tiny_checkpoints["base"], deploy_config=deploy)}
    defaults = checks["stage-0 default sampling (our overlay vs the server's deploy file)"]
    # the preset's temperature is written over the deploy file's; the seed it does not map is inherited
    assert defaults.status == "mismatch" and "temperature=0.9 vs 0.5" in defaults.figure, defaults
    assert "seed=11 vs 11" in defaults.figure
    budgets = checks["codec budgets per task (talker additional_config)"]
    assert budgets.status == "mismatch" and "Base: 12/tok, min 192 vs adapter 2/tok, min 77" in budgets.figure
    assert "CustomVoice: 40/tok, min 400 vs adapter 40/tok, min 77" in budgets.figure
    sampling = checks["Base x-vector only (no transcript): stage-0 sampling"]
    assert sampling.status == "mismatch" and "tts_local_seed=11 vs 11" in sampling.figure, sampling
    assert "max_tokens=77 vs 77" not in sampling.figure and "max_tokens=" in sampling.figure


def test_the_codec_budgets_are_the_talker_stages_and_each_family_has_one_spec():
    pytest.importorskip("vllm_omni")
    from types import SimpleNamespace

    from omnicli.families import family_names, get_family
    from omnicli.vllm_omni.requests import codec_budgets
    from omnicli.vllm_omni.spec import OMNI_FAMILIES, omni_family

    def stage(stage_id: int, config: dict) -> SimpleNamespace:
        return SimpleNamespace(stage_id=stage_id, runtime_config=SimpleNamespace(additional_config=config))

    budgets = codec_budgets([stage(1, {"codec_budget_min_frames": 5}),
                             stage(0, {"codec_budget_min_frames": {"VoiceDesign": 33}})])
    assert (budgets["VoiceDesign"].min_frames, budgets["Base"].min_frames) == (33, 192)
    assert codec_budgets([])["CustomVoice"].frames_per_text_token == 40.0  # no stage: vLLM-Omni's defaults
    omni = sorted(name for name in family_names() if get_family(name).engine == "vllm-omni")
    assert omni == sorted(OMNI_FAMILIES)
    with pytest.raises(ValueError, match="not a vLLM-Omni family"):
        omni_family("orpheus")


def test_a_request_the_checkpoint_cannot_serve_is_refused_before_it_reaches_vllm_omni(tiny_checkpoints):
    from vllm import SamplingParams

    from omnicli.engine.request import TTSRequest
    from omnicli.vllm_omni.requests import Qwen3Checkpoint, Qwen3RequestBuilder, RequestInvalid, load_tokenizer

    def builder(kind):
        ckpt = Qwen3Checkpoint.read(tiny_checkpoints[kind])
        return Qwen3RequestBuilder(ckpt, load_tokenizer(ckpt.path), [SamplingParams(max_tokens=64), SamplingParams()])

    base, custom, design = builder("base"), builder("custom_voice"), builder("voice_design")
    cases = [(base, TTSRequest("a", "No reference."), "needs a reference"),
             (base, TTSRequest("a", "  "), "input text is empty"),
             (custom, TTSRequest("a", "Hi.", voice="nobody"), "not one of this checkpoint's speakers (vivian, ryan)"),
             (custom, TTSRequest("a", "Hi.", language="Klingon"), "language 'Klingon' is not supported"),
             (design, TTSRequest("a", "Hi."), "needs an instruction")]
    for b, request, message in cases:
        with pytest.raises(RequestInvalid, match=re.escape(message)):
            b.build(request)
    profile_voice = Qwen3RequestBuilder(custom.ckpt, custom.tokenizer, custom.defaults, {"voice": "Ryan"})
    assert profile_voice.build(TTSRequest("a", "Hi.")).prompt["additional_information"]["speaker"] == ["ryan"]
    assert profile_voice.build(TTSRequest("a", "Hi.", voice="vivian")).prompt["additional_information"]["speaker"] == [
        "vivian"
    ]
