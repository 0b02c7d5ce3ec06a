"""Profiles run no code (issue 31 items 1, 13, 17): raw vLLM-Omni keys pass an allow-list, every
overlay says trust_remote_code: false, deploy YAMLs are read bounded and safe, base_config chains
are linear and bounded. No engine starts here: every refusal comes at profile load, which is
`omni profiles validate` and the first thing `synth`/`bench`/`eval-wer` do."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli.errors import EXIT_USAGE, UsageError
from omnicli.profile import ProfileError, load_profile
from omnicli.profile import loader as profile_loader

runner = CliRunner()
needs_vllm_omni = pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is None, reason="vllm-omni not installed")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # messages show paths relative to the cwd: `p.yaml:4: ...`


def write(rel: str, text: str) -> Path:
    path = Path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(text: str, **kwargs) -> list[str]:
    write("p.yaml", text)
    kwargs.setdefault("platform", "cpu")
    with pytest.raises(ProfileError) as info:
        load_profile("p.yaml", **kwargs)
    return info.value.problems


def said(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def hostile_folder(tmp_path) -> tuple[Path, Path]:
    """(a config folder whose auto_map names evil.py, the marker evil.py writes when imported)."""
    folder, marker = tmp_path / "hostile", tmp_path / "pwned"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "evil_tts", "auto_map": {"AutoConfig": "evil.EvilConfig"}}))
    (folder / "evil.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported')\n"
        "from transformers import PretrainedConfig\n"
        "class EvilConfig(PretrainedConfig):\n"
        "    model_type = 'evil_tts'\n")
    return folder, marker


# ------------------------------------------------------------- item 1: the attack


def test_the_hostile_folder_is_a_real_attack_when_code_is_trusted(hostile_folder, tmp_path):
    """What vLLM does with hf_config_path under trust_remote_code: true (the packaged qwen3_tts.yaml):
    transformers imports the folder's module, which writes the marker."""
    folder, marker = hostile_folder
    code = f"from transformers import AutoConfig; AutoConfig.from_pretrained({str(folder)!r}, trust_remote_code=True)"
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=600, check=True)
    assert marker.read_text() == "imported"


def test_synth_refuses_hf_config_path_from_set_before_anything_starts(hostile_folder, tmp_path):
    from omnicli.cli import app

    folder, marker = hostile_folder
    write("meta.lst", "a|hello\n")
    result = runner.invoke(app, ["synth", "meta.lst", "--out", "out", "--profile", "qwen3-tts",
                                 "--set", f'vllm_omni.stage_overrides={{"0": {{"hf_config_path": "{folder}"}}}}'])
    assert result.exit_code == EXIT_USAGE, said(result)
    assert "--set vllm_omni.stage_overrides.0.hf_config_path: not on omni's allow-list" in said(result)
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_validate_names_the_profile_file_line_and_key(hostile_folder):
    from omnicli.cli import app

    folder, marker = hostile_folder
    write("p.yaml", f"""\
        model: qwen3-tts
        vllm_omni:
          stage_overrides:
            "0":
              hf_config_path: {folder}
        """)
    result = runner.invoke(app, ["profiles", "validate", "p.yaml", "--platform", "cpu"])
    assert result.exit_code == EXIT_USAGE, said(result)
    assert "p.yaml:5: vllm_omni.stage_overrides.0.hf_config_path: not on omni's allow-list" in said(result)
    assert not marker.exists()


@pytest.mark.parametrize(("body", "problem"), [
    ("  deploy_config:\n    trust_remote_code: true\n", "p.yaml:4: vllm_omni.deploy_config.trust_remote_code: not on"),
    ("  deploy_config:\n    stages:\n      - stage_id: 0\n        tokenizer: /x\n",
     "p.yaml:6: vllm_omni.deploy_config.stages.0.tokenizer: not on"),
    ("  deploy_config:\n    stages:\n      - stage_id: 1\n        worker_cls: evil.Worker\n",
     "p.yaml:6: vllm_omni.deploy_config.stages.0.worker_cls: not on"),
    ("  deploy_config:\n    stages:\n      - stage_id: 1\n        env: {PYTHONPATH: /x}\n",
     "p.yaml:6: vllm_omni.deploy_config.stages.0.env: not on"),
    ("  deploy_config:\n    stages:\n      - stage_id: 1\n        compilation_config: {backend: evil.compile}\n",
     "p.yaml:6: vllm_omni.deploy_config.stages.0.compilation_config.backend: must be one of inductor, eager (got "),
    ("  deploy_config:\n    connectors:\n      shm: {name: EvilConnector}\n",
     "p.yaml:5: vllm_omni.deploy_config.connectors.shm.name: not on"),
    ("  deploy_config:\n    connectors:\n      shm:\n        extra: {custom_process_next_stage_input_func: m.f}\n",
     "p.yaml:6: vllm_omni.deploy_config.connectors.shm.extra.custom_process_next_stage_input_func: must be a number"),
    ("  stage_overrides:\n    '1': {trust_remote_code: true}\n",
     "p.yaml:4: vllm_omni.stage_overrides.1.trust_remote_code: not on"),
    ("  stage_overrides:\n    '0': {hf_overrides: {auto_map: x.Y}}\n",
     "p.yaml:4: vllm_omni.stage_overrides.0.hf_overrides.auto_map: not on"),
    ("  stage_overrides:\n    '0': {model: /x}\n", "p.yaml:4: vllm_omni.stage_overrides.0.model: not on"),
])
def test_keys_off_the_allow_list_are_refused_with_file_line_and_key(body, problem):
    [got] = problems_of("model: qwen3-tts\nvllm_omni:\n" + body)
    assert got.startswith(problem), got


def test_every_platform_overlay_is_checked_not_only_this_machines():
    [got] = problems_of("""\
        model: qwen3-tts
        platforms:
          cuda:
            vllm_omni:
              deploy_config: {trust_remote_code: true}
        """, platform="cpu")
    assert got.startswith("p.yaml:5: platforms.cuda.vllm_omni.deploy_config.trust_remote_code: not on"), got


def test_a_refused_set_value_names_its_key():
    with pytest.raises(ProfileError) as info:
        load_profile("qwen3-tts", platform="cpu",
                     overrides=["vllm_omni.deploy_config={stages: [{stage_id: 0, hf_config_path: /x}]}"])
    [got] = info.value.problems
    assert got.startswith("--set vllm_omni.deploy_config.stages.0.hf_config_path: not on omni's allow-list"), got


@needs_vllm_omni
def test_allowed_keys_still_pass_through_to_the_overlay():
    from omnicli.vllm_omni.overlay import build_overlay

    write("p.yaml", """\
        model: qwen3-tts
        vllm_omni:
          deploy_config:
            enable_prefix_caching: false
            connectors:
              connector_of_shared_memory:
                extra: {codec_left_context_frames: 48, codec_chunk_ramp: [2, 8], generation_coalescing_policy: fixed}
            stages:
              - stage_id: 0
                subtalker_sampling_params: {do_sample: false, top_k: 10}
                compilation_config: {backend: inductor, cudagraph_capture_sizes: [1, 2]}
          stage_overrides:
            "1": {max_model_len: 32768, seed: 7, dtype: float32, hf_overrides: {mrv2_eager_mtp: true}}
        """)
    resolved = load_profile("p.yaml", platform="cpu")
    overlay = build_overlay(resolved)
    assert overlay.stage_overrides == {
        "1": {"max_model_len": 32768, "seed": 7, "dtype": "float32", "hf_overrides": {"mrv2_eager_mtp": True}}}
    extra = overlay.data["connectors"]["connector_of_shared_memory"]["extra"]
    assert extra["codec_left_context_frames"] == 48 and extra["codec_chunk_ramp"] == [2, 8]
    talker = overlay.data["stages"][0]
    assert talker["subtalker_sampling_params"] == {"do_sample": False, "top_k": 10}
    assert talker["compilation_config"]["cudagraph_capture_sizes"] == [1, 2]


@needs_vllm_omni
@pytest.mark.parametrize("preset", ["qwen3-tts", "moss-tts-local-mrv2-high-concurrency"])
@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_every_overlay_says_trust_remote_code_false(preset, platform):
    from omnicli.vllm_omni.overlay import build_overlay

    data = build_overlay(load_profile(preset, platform=platform)).data
    assert data["trust_remote_code"] is False
    assert [s["trust_remote_code"] for s in data["stages"]] == [False, False]


@needs_vllm_omni
def test_a_user_deploy_files_trust_remote_code_true_is_overridden_everywhere(tmp_path):
    from omnicli.vllm_omni.overlay import build_overlay

    write("deploy.yaml", """\
        base_config: {packaged}
        trust_remote_code: true
        stages:
          - {stage_id: 0, trust_remote_code: true}
          - {stage_id: 2, trust_remote_code: true}
        platforms:
          cpu:
            trust_remote_code: true
            stages:
              - {stage_id: 1, trust_remote_code: true}
        """.replace("{packaged}", str(_packaged("qwen3_tts.yaml"))))
    resolved = load_profile("qwen3-tts", platform="cpu",
                            overrides=[f"vllm_omni.base_deploy_config={tmp_path / 'deploy.yaml'}"])
    data = build_overlay(resolved).data
    assert data["trust_remote_code"] is False
    assert {s["stage_id"]: s["trust_remote_code"] for s in data["stages"]} == {0: False, 1: False, 2: False}
    cpu = data["platforms"]["cpu"]
    assert cpu["trust_remote_code"] is False
    assert [s["trust_remote_code"] for s in cpu["stages"] if s["stage_id"] == 1] == [False]


def _packaged(name: str) -> Path:
    from omnicli.profile.deploy_files import packaged_deploy_dir

    return packaged_deploy_dir() / name


def test_a_user_deploy_file_naming_a_folder_with_code_is_refused(hostile_folder):
    folder, marker = hostile_folder
    write("deploy.yaml", f"stages:\n  - stage_id: 0\n    hf_config_path: {folder}\n")
    [got] = problems_of("model: qwen3-tts\nvllm_omni:\n  base_deploy_config: ./deploy.yaml\n")
    assert got.startswith("p.yaml:3: vllm_omni.base_deploy_config: "), got
    assert "config.json: refusing this model folder: its auto_map names Python code (evil.EvilConfig)" in got
    assert not marker.exists()


@pytest.mark.parametrize(("text", "key"), [
    ("stages:\n  - stage_id: 0\n    worker_cls: evil.Worker\n", "deploy.yaml:3: stages.0.worker_cls"),
    ("stages:\n  - stage_id: 0\n    env: {PYTHONPATH: /tmp/x}\n", "deploy.yaml:3: stages.0.env"),
    ("connectors:\n  c:\n    extra: {custom_process_next_stage_input_func: evil.f}\n",
     "deploy.yaml:3: connectors.c.extra.custom_process_next_stage_input_func"),
])
def test_a_user_deploy_file_naming_code_is_refused(text, key):
    write("deploy.yaml", text)
    [got] = problems_of("model: qwen3-tts\nvllm_omni:\n  base_deploy_config: ./deploy.yaml\n")
    assert got.startswith(f"p.yaml:3: vllm_omni.base_deploy_config: {key}: names Python code"), got


# --------------------------------------------------------- item 13: deploy files


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize(("files", "start", "reason"), [
    ({"d.yaml": "stages: !!python/object/apply:os.system [touch pwned]\n"}, "d.yaml:1: invalid YAML: ",
     "could not determine a constructor"),
    ({"d.yaml": "base_config: e.yaml\n", "e.yaml": "dtype: float32\nbase_config: d.yaml\n"}, "e.yaml:2: base_config: ",
     "cycle: d.yaml -> e.yaml -> d.yaml"),
    ({"d.yaml": "- stage_id: 0\n"}, "d.yaml:1: ", "must be a mapping at the top (got list)"),
    ({"d.yaml": BOMB}, "d.yaml:", "alias bomb"),
    ({"d.yaml": "base_config: /dev/zero\n"}, "/dev/zero: cannot read this deploy config: ", "not a regular file"),
    ({"d.yaml": "base_config: nowhere.yaml\n"}, "nowhere.yaml: cannot read this deploy config: ", "no such file"),
    ({}, "d.yaml: cannot read this deploy config: ", "no such file"),
])
def test_a_bad_deploy_file_is_named_at_profile_load(files, start, reason):
    for name, text in files.items():
        write(name, text)
    write("p.yaml", "model: qwen3-tts\nvllm_omni:\n  base_deploy_config: ./d.yaml\n")
    with pytest.raises(ProfileError) as info:
        load_profile("p.yaml", platform="cpu")
    [got] = info.value.problems
    assert got.startswith(f"p.yaml:3: vllm_omni.base_deploy_config: {start}"), got
    assert reason in got
    assert not Path("pwned").exists()


def test_a_fifo_deploy_file_is_refused_without_waiting_for_a_writer():
    os.mkfifo("d.yaml")
    write("p.yaml", "model: qwen3-tts\nvllm_omni:\n  base_deploy_config: ./d.yaml\n")
    t0 = time.monotonic()
    with pytest.raises(ProfileError) as info:
        load_profile("p.yaml", platform="cpu")
    assert "d.yaml: cannot read this deploy config: is not a regular file" in info.value.problems[0]
    assert time.monotonic() - t0 < 60  # a read would block forever


def test_validate_and_synth_exit_2_naming_a_missing_deploy_file(tmp_path):
    from omnicli.cli import app

    write("p.yaml", "model: qwen3-tts\nvllm_omni:\n  base_deploy_config: ./gone.yaml\n")
    write("meta.lst", "a|hello\n")
    for args in (["profiles", "validate", "p.yaml", "--platform", "cpu"],
                 ["synth", "meta.lst", "--out", "out", "--profile", "p.yaml"]):
        result = runner.invoke(app, args)
        assert result.exit_code == EXIT_USAGE, said(result)
        assert "p.yaml:3: vllm_omni.base_deploy_config: gone.yaml: cannot read this deploy config: no such file" \
            in said(result)
        assert "free space" not in said(result)


@needs_vllm_omni
def test_the_overlay_reports_a_deploy_file_gone_after_profile_load_as_bad_input():
    from omnicli.vllm_omni.overlay import build_overlay

    write("d.yaml", "dtype: float32\n")
    resolved = load_profile("qwen3-tts", platform="cpu", overrides=["vllm_omni.base_deploy_config=./d.yaml"])
    Path("d.yaml").unlink()
    with pytest.raises(UsageError, match="d.yaml: cannot read this deploy config: no such file"):
        build_overlay(resolved)


# ------------------------------------------------------ item 17: profile chains


def _chain(n: int) -> None:
    write("p0.yaml", "seed: 0\n")
    for i in range(1, n):
        write(f"p{i}.yaml", f"base_config: p{i - 1}.yaml\nseed: {i}\n")


def test_a_chain_at_the_bound_resolves_reading_each_file_once(monkeypatch):
    _chain(profile_loader.MAX_CHAIN)
    reads = []
    real = profile_loader._read_yaml
    monkeypatch.setattr(profile_loader, "_read_yaml", lambda path: reads.append(path) or real(path))
    top = f"p{profile_loader.MAX_CHAIN - 1}.yaml"
    resolved = load_profile(top, platform="cpu")
    assert resolved.profile.seed == profile_loader.MAX_CHAIN - 1 and resolved.origins["seed"] == top
    assert len(reads) == len(set(reads)) == profile_loader.MAX_CHAIN


def test_a_chain_of_1200_files_is_a_clear_error_not_a_recursion_error():
    _chain(1200)
    with pytest.raises(ProfileError) as info:
        load_profile("p1199.yaml", platform="cpu")
    [got] = info.value.problems
    assert got == (f"p{1200 - profile_loader.MAX_CHAIN}.yaml:1: base_config: an inheritance chain of more than "
                   f"{profile_loader.MAX_CHAIN} files (from p1199.yaml); flatten it")


def test_a_profile_over_the_size_bound_is_refused_by_name():
    write("big.yaml", "seed: 1\n" + "#" * profile_loader.MAX_PROFILE_BYTES + "\n")
    with pytest.raises(ProfileError) as info:
        load_profile("big.yaml", platform="cpu")
    assert info.value.problems == [f"big.yaml: cannot read profile: is {profile_loader.MAX_PROFILE_BYTES + 9} bytes, "
                                   f"over the {profile_loader.MAX_PROFILE_BYTES}-byte limit for this file"]
