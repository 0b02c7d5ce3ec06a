"""Issue 32 item 8: the deploy `base_config` merge omni reads a profile's vLLM-Omni deploy file with
(omnicli.profile.deploy_files.read_deploy) against vLLM-Omni's own (config/stage_config.py,
resolve_deploy_yaml) on the same files: every packaged deploy file that names a base, and a chain written
here that reaches each rule. A change of theirs fails here."""

from __future__ import annotations

import pytest
import yaml

from omnicli.profile.deploy_files import packaged_deploy_dir, read_deploy

stage_config = pytest.importorskip("vllm_omni.config.stage_config", reason="vLLM-Omni is not installed")


def test_every_packaged_deploy_file_with_a_base_folds_as_vllm_omni_folds_it():
    files = [p for p in sorted(packaged_deploy_dir().glob("*.yaml")) if "base_config" in p.read_text()]
    assert files, "vLLM-Omni ships deploy files that name a base_config"
    different = [p.name for p in files if read_deploy(p) != stage_config.resolve_deploy_yaml(p)]
    assert different == []


def test_a_chain_reaching_every_rule_folds_as_vllm_omni_folds_it(tmp_path):
    base = {"async_chunk": True, "speech_cache": {"size": 4, "policy": {"kind": "lru", "ttl": 10}},
            "connectors": {"shm": {"name": "SharedMemoryConnector", "extra": {"a": 1, "b": {"c": 2}}}},
            "stages": [{"stage_id": 0, "max_num_seqs": 8, "engine_args": {"x": 1, "y": {"z": 1}},
                        "runtime": {"devices": "0", "keep": True}},
                       {"stage_id": 1, "default_sampling_params": {"temperature": 0.9, "top_k": 50}}],
            "platforms": {"xpu": {"model_runner": "v1", "stages": [{"stage_id": 0, "engine_args": {"x": 3}}]},
                          "npu": {"stages": [{"stage_id": 1, "max_num_seqs": 2}]}}}
    middle = {"base_config": "base.yaml", "speech_cache": {"policy": {"ttl": 20}},
              "stages": [{"stage_id": 0, "engine_args": {"y": {"w": 2}}, "runtime": {"devices": "1"}},
                         {"stage_id": 2, "max_num_seqs": 1}],
              "platforms": {"xpu": {"stages": [{"stage_id": 0, "engine_args": {"q": 1}}, {"stage_id": 1}]}}}
    top = {"base_config": "middle.yaml", "async_chunk": False,
           "connectors": {"shm": {"extra": {"b": {"d": 3}}}, "other": {"name": "X"}},
           "stages": [{"stage_id": 1, "default_sampling_params": {"top_k": 20}, "max_num_seqs": 4}],
           "platforms": {"npu": {"model_runner": "v2"}, "rocm": {"stages": [{"stage_id": 0}]}}}
    for name, data in (("base", base), ("middle", middle), ("top", top)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
    ours = read_deploy(tmp_path / "top.yaml")
    assert ours == stage_config.resolve_deploy_yaml(tmp_path / "top.yaml")
    assert ours["stages"][0]["runtime"] == {"devices": "1"}  # not merged: the file's replaces the base's
    assert ours["stages"][0]["engine_args"] == {"x": 1, "y": {"z": 1, "w": 2}}  # merged key by key
