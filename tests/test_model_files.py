"""Checkpoint files checked before any loader reads them: damaged JSON and safetensors headers named,
remote code refused, pickled codecs refused in one line, weights that cannot fit the machine refused."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch

from omnicli.engine.memory import GiB, check_talker_fits, talker_parameters
from omnicli.engine.models.orpheus import REAL_TALKER, TINY_TALKER
from omnicli.engine.request import EngineError
from omnicli.model_files import ModelFileError, check_model_folder, check_safetensors, read_json


def safetensors_file(path: Path, tensors: dict | None = None) -> Path:
    from safetensors.torch import save_file

    save_file(tensors or {"w": torch.zeros(2, 3)}, str(path))
    return path


def test_a_well_formed_folder_passes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_TALKER))
    (tmp_path / "tokenizer.json").write_text('{"model": {}}')
    safetensors_file(tmp_path / "model.safetensors")
    check_model_folder(tmp_path)


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_a_truncated_json_file_is_named_with_line_and_column(tmp_path, name):
    (tmp_path / name).write_text('{\n  "vocab_size": 156940,\n  "hidden_')
    with pytest.raises(ModelFileError) as info:
        check_model_folder(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / name}:3:3: not valid JSON (") and "damaged or cut short" in str(
        info.value
    )


def test_a_safetensors_header_claiming_2_to_the_62_bytes_is_refused_from_8_bytes(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 62) + b'{"w": {}}')
    with pytest.raises(
        ModelFileError, match=rf"model.safetensors: the safetensors header claims {1 << 62} bytes, but the file holds 9"
    ):
        check_safetensors(path)


def test_safetensors_tensors_that_lie_about_their_data_are_refused(tmp_path):
    path = safetensors_file(tmp_path / "model.safetensors", {"w": torch.zeros(4)})
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    header["w"]["shape"] = [1 << 40]  # a shape the 16 data bytes cannot hold
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length:])
    with pytest.raises(
        ModelFileError, match=r"tensor 'w': shape \[1099511627776\] of F32 does not fit data_offsets \[0, 16\]"
    ):
        check_safetensors(path)
    header["w"].update(shape=[4], data_offsets=[0, 1 << 62])
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length:])
    with pytest.raises(ModelFileError, match=r"lie outside the 16 bytes of data the file holds"):
        check_safetensors(path)


def test_a_config_with_auto_map_is_refused_naming_the_code(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.Tok", None]}}))
    with pytest.raises(
        ModelFileError,
        match=r"tokenizer_config.json: refusing this model folder: its auto_map names Python code \(evil.Tok\)",
    ):
        check_model_folder(tmp_path)


def test_read_json_names_a_file_that_is_not_utf8(tmp_path):
    (tmp_path / "config.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ModelFileError, match="config.json: not UTF-8 text"):
        read_json(tmp_path / "config.json")


# --- the talker's weights against the machine ------------------------------------------------------


def test_talker_parameters_match_the_published_orpheus_size():
    from transformers import LlamaConfig

    # Llama 3.2 3B (3.21 billion) with Orpheus' 28,684 added tokens embedded (tied head): 3.30 billion.
    assert talker_parameters(REAL_TALKER) == pytest.approx(3.30e9, rel=0.01)
    with torch.device("meta"):
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**TINY_TALKER))
    assert talker_parameters(TINY_TALKER) == sum(p.numel() for p in model.parameters())


def test_a_talker_that_cannot_fit_is_refused_in_one_line(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(TINY_TALKER, num_hidden_layers=1_000_000, torch_dtype="bfloat16")))
    with pytest.raises(EngineError) as info:
        check_talker_fits(config, "auto", "cpu", kv_cache_space_gb=4, memory_bytes=24 * GiB)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        f"{config}: the talker has about 148 billion parameters (275.2 GiB in bfloat16)"
    )
    assert "plus talker.kv_cache_space_gb=4 GiB, but this machine has 24.0 GiB" in message
    with pytest.raises(EngineError, match=r"gpu_memory_utilization=0.5 gives vLLM 40.0 GiB"):
        check_talker_fits(config, "float32", "cuda", gpu_memory_utilization=0.5, memory_bytes=80 * GiB)
    config.write_text(json.dumps(REAL_TALKER))  # Orpheus 3B: 6.1 GiB of bfloat16 weights
    check_talker_fits(config, "auto", "cpu", kv_cache_space_gb=4, memory_bytes=24 * GiB)
    with pytest.raises(EngineError, match="6.1 GiB in bfloat16"):
        check_talker_fits(config, "auto", "cpu", kv_cache_space_gb=4, memory_bytes=8 * GiB)


def test_a_talker_config_with_nonsense_sizes_names_the_key(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(TINY_TALKER, hidden_size="big")))
    with pytest.raises(EngineError, match=r"config.json: hidden_size is 'big', not a non-negative whole number"):
        check_talker_fits(config, "auto", "cpu", memory_bytes=24 * GiB)


# --- a pickled codec -------------------------------------------------------------------------------


class _RunsCode:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_snac_codec_is_refused_in_one_line(tmp_path):
    from omnicli.engine.models.orpheus import TINY_SNAC
    from omnicli.engine.models.snac_codec import load_snac

    marker = tmp_path / "pwned"
    (tmp_path / "config.json").write_text(json.dumps(TINY_SNAC))
    torch.save({"decoder.w": torch.zeros(1), "x": _RunsCode(str(marker))}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelFileError) as info:
        load_snac(tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'pytorch_model.bin'}: refused: the pickle holds")
    assert "GLOBAL posix.system" in message and not marker.exists()


# --- the commands: a cheap Orpheus-layout folder (real tokenizer, placeholder weights) -------------


@pytest.fixture(scope="module")
def orpheus_files(tmp_path_factory) -> Path:
    """talker/ and codec/ with the files each needs; the weights are placeholders no test loads."""
    from omnicli.engine.models import orpheus, tiny_tokenizer

    root = tmp_path_factory.mktemp("orpheus-files")
    (root / "talker").mkdir()
    (root / "codec").mkdir()
    (root / "talker" / "config.json").write_text(
        json.dumps(dict(orpheus.TINY_TALKER, architectures=["LlamaForCausalLM"]))
    )
    tiny_tokenizer.build(root / "talker", regular_size=128000, added=orpheus.special_tokens(),
                         bos="<|begin_of_text|>", eos="<|eot_id|>")
    safetensors_file(root / "talker" / "model.safetensors")
    (root / "codec" / "config.json").write_text(json.dumps(orpheus.TINY_SNAC))
    torch.save({"decoder.w": torch.zeros(1)}, root / "codec" / "pytorch_model.bin")
    return root


@pytest.fixture
def checkpoint(orpheus_files, tmp_path) -> Path:
    import shutil

    shutil.copytree(orpheus_files, tmp_path / "ckpt")
    return tmp_path / "ckpt"


def omni(*args: str):
    from typer.testing import CliRunner

    from omnicli.cli import app

    result = CliRunner().invoke(app, list(args))
    return result, " ".join(result.output.split())


def synth(tmp_path: Path, ckpt: Path):
    (tmp_path / "meta.lst").write_text("u1|||One.\n")
    return omni(
        "synth",
        str(tmp_path / "meta.lst"),
        "--out",
        str(tmp_path / "out"),
        "--profile",
        "cpu",
        "--set",
        "model=orpheus",
        "--set",
        f"model_path={ckpt / 'talker'}",
        "--set",
        f"codec_path={ckpt / 'codec'}",
    )


def test_synth_refuses_a_talker_that_cannot_fit_before_anything_loads(tmp_path, checkpoint):
    # Was: vLLM's engine core grew until it was killed (6 GB after 76 s), then "see root cause above"
    # with nothing above.
    config = checkpoint / "talker" / "config.json"
    config.write_text(json.dumps(dict(json.loads(config.read_text()), num_hidden_layers=1_000_000)))
    result, said = synth(tmp_path, checkpoint)
    assert result.exit_code == 3, said
    assert f"{config}: the talker has about 148 billion parameters" in said and "use a smaller checkpoint" in said
    assert "Traceback" not in said and "talker started" not in said


@pytest.mark.parametrize("damage", ["tokenizer.json", "config.json", "model.safetensors"])
def test_synth_names_a_damaged_checkpoint_file_and_exits_2(tmp_path, checkpoint, damage):
    # Was: a MemoryError with no reason, or a parse error without the file, and exit 3 ("engine failed").
    path = checkpoint / "talker" / damage
    if damage == "model.safetensors":
        path.write_bytes(struct.pack("<Q", 1 << 62) + b"{}")
    else:
        path.write_bytes(path.read_bytes()[:40])
    result, said = synth(tmp_path, checkpoint)
    assert result.exit_code == 2, said
    assert f"error: {path}" in said and ("not valid JSON" in said or "claims 4611686018427387904 bytes" in said)
    assert "Traceback" not in said


def test_synth_refuses_a_tokenizer_folder_with_auto_map(tmp_path, checkpoint):
    path = checkpoint / "talker" / "tokenizer_config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), auto_map={"AutoTokenizer": ["evil.Tok", None]})))
    result, said = synth(tmp_path, checkpoint)
    assert result.exit_code == 2 and f"error: {path}: refusing this model folder" in said, said


def test_models_verify_refuses_a_pickled_codec_in_one_line(tmp_path, checkpoint):
    # Was: refused by weights_only, but as a 60-line traceback, exit 1.
    marker = tmp_path / "pwned"
    weights = checkpoint / "codec" / "pytorch_model.bin"
    torch.save({"decoder.w": torch.zeros(1), "x": _RunsCode(str(marker))}, weights)
    result, said = omni("models", "verify", "orpheus", "--checkpoint", str(checkpoint))
    assert result.exit_code == 2, said
    assert said.startswith(f"error: {weights}: refused: the pickle holds Python objects") and "Traceback" not in said
    assert not marker.exists()


def test_models_verify_refuses_remote_code_in_the_tokenizer_folder(tmp_path, checkpoint):
    path = checkpoint / "talker" / "tokenizer_config.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), auto_map={"AutoTokenizer": ["evil.Tok", None]})))
    result, said = omni("models", "verify", "orpheus", "--checkpoint", str(checkpoint))
    assert result.exit_code == 2 and "auto_map names Python code (evil.Tok)" in said, said
