"""The vLLM-Omni families' checkpoints: specs, and the random-weight Qwen3-TTS build read back with
vLLM-Omni's own config and codec classes (no engine starts)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from omnicli.engine.models.checkpoints import CheckpointMissing
from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts, locate_checkpoint, locate_codec

needs_vllm_omni = pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is None, reason="vllm-omni not installed")


def test_missing_checkpoint_names_every_missing_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(CheckpointMissing) as err:
        locate_checkpoint("qwen3-tts", str(tmp_path))
    message = str(err.value)
    assert "speech_tokenizer/config.json" in message and "model.safetensors" in message
    assert "missing config.json" not in message  # present files are not named
    with pytest.raises(CheckpointMissing, match="processing_moss_tts.py"):
        locate_checkpoint("moss-tts-local", str(tmp_path))
    with pytest.raises(CheckpointMissing, match="MOSS-Audio-Tokenizer-v2"):
        locate_codec("moss-tts-local", None)
    assert locate_codec("qwen3-tts", None) is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-tiny")
    info = {kind: build_tiny_qwen3_tts(root / kind, seed=3, kind=kind) for kind in ("base", "custom_voice")}
    return root, info


@needs_vllm_omni
def test_tiny_qwen3_tts_is_a_complete_published_layout(tiny):
    from safetensors import safe_open

    root, info = tiny
    for kind in ("base", "custom_voice"):
        assert locate_checkpoint("qwen3-tts", str(root / kind)) == root / kind
        cfg = json.loads((root / kind / "config.json").read_text())
        assert cfg["model_type"] == "qwen3_tts" and cfg["tts_model_type"] == kind
        assert cfg["talker_config"]["codec_eos_token_id"] == 2150  # vLLM-Omni's pipeline stops on 2150
        with safe_open(str(root / kind / "model.safetensors"), "pt") as f:
            names = set(f.keys())
        assert all(n.startswith(("talker.", "speaker_encoder.")) for n in names)
        has_speaker_encoder = any(n.startswith("speaker_encoder.") for n in names)
        assert has_speaker_encoder == (kind == "base")  # only Base clones from a reference
        groups = cfg["talker_config"]["num_code_groups"]
        assert sum(n.startswith("talker.code_predictor.lm_head.") for n in names) == groups - 1
    assert info["custom_voice"]["speakers"] == ["ryan", "vivian"] and info["base"]["speakers"] == []


@needs_vllm_omni
def test_tiny_speech_tokenizer_loads_with_vllm_omni_and_decodes_audible_pcm(tiny):
    import torch
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    root, _ = tiny
    cfg = Qwen3TTSConfig(**json.loads((root / "base" / "config.json").read_text()))
    assert cfg.talker_config.hidden_size == cfg.speaker_encoder_config.enc_dim  # x-vectors live in talker space
    codec = Qwen3TTSTokenizerV2Model.from_pretrained(str(root / "base" / "speech_tokenizer")).eval()
    codes = torch.randint(0, 2048, (1, 12, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        (wav,) = codec.decode(codes).audio_values
    assert wav.shape[-1] == 12 * 1920  # 12.5 frames/s at 24 kHz
    assert 0.05 < float(wav.abs().max()) < 5  # not silence (fresh codebooks are all zero)
    assert float(wav.std()) > 1e-3
