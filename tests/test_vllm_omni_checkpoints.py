"""The vLLM-Omni families' checkpoints: specs, and the random-weight Qwen3-TTS build read back with
vLLM-Omni's own config and codec classes (no engine starts)."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from omnicli.checkpoints import CheckpointMissing
from omnicli.cli import app
from omnicli.errors import EXIT_USAGE
from omnicli.vllm_omni.checkpoints import locate_checkpoint, locate_codec

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
    """Base and CustomVoice with a stopping talker (mean 25 frames), built through the CLI."""
    root = tmp_path_factory.mktemp("qwen3-tiny") / "ckpt"
    result = CliRunner().invoke(app, ["models", "build-tiny", "qwen3-tts", str(root), "--seed", "3",
                                      "--stop-frames", "25"])
    assert result.exit_code == 0, result.output
    return root, json.loads((root / "BUILD_INFO.json").read_text())


@needs_vllm_omni
def test_build_tiny_writes_the_stop_setting_into_both_talkers(tiny):
    import math

    import torch
    from safetensors.torch import load_file

    from omnicli.vllm_omni.checkpoints import _STOP_DIM, _STOP_LEVEL, _talker_weights

    root, info = tiny
    assert info["stop_frames"] == 25.0 and info["seed"] == 3
    for kind in ("base", "custom_voice"):
        cfg = json.loads((root / kind / "config.json").read_text())
        eos, hidden = cfg["talker_config"]["codec_eos_token_id"], cfg["talker_config"]["hidden_size"]
        logit = info[kind]["eos_logit"]
        assert info[kind]["stop_frames"] == 25.0
        assert logit == pytest.approx(0.9 * math.log(49 / 24))  # temperature 0.9, top-k 50, P(EOS) 1/25
        w = load_file(str(root / kind / "model.safetensors"))
        row = w["talker.codec_head.weight"][eos]
        assert row.nonzero().flatten().tolist() == [_STOP_DIM]  # only the stop channel reaches EOS
        assert float(row[_STOP_DIM]) == pytest.approx(logit / math.sqrt(hidden))
        assert float(w["talker.text_projection.linear_fc2.bias"][_STOP_DIM]) == _STOP_LEVEL
        plain = _talker_weights(cfg, torch.Generator().manual_seed(3))  # the --seed reached the weights
        assert plain["talker.codec_head.weight"][eos].count_nonzero() == hidden  # dense without the option
        name = "talker.model.layers.0.self_attn.q_proj.weight"
        assert torch.equal(w[name], plain[name])  # the rest of the talker is the plain build's


@pytest.mark.parametrize(("family", "value", "says"), [
    ("qwen3-tts", "0", "must be above 1"), ("qwen3-tts", "-4", "must be above 1"),
    ("qwen3-tts", "1", "must be above 1"), ("qwen3-tts", "nan", "must be above 1"),
    ("qwen3-tts", "many", "Invalid value for '--stop-frames'"), ("orpheus", "25", "--stop-frames is not an option"),
])
def test_build_tiny_refuses_a_bad_stop_setting_before_writing(tmp_path, family, value, says):
    dest = tmp_path / "ckpt"
    result = CliRunner().invoke(app, ["models", "build-tiny", family, str(dest), "--stop-frames", value])
    assert result.exit_code == EXIT_USAGE, result.output
    assert says in " ".join(result.output.split()), result.output
    assert not dest.exists() and not any(tmp_path.iterdir())  # nothing written, not even the build folder


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


def _decode_step_logits(w: dict, cfg: dict, gen: Any) -> Any:
    """The codec head's logits for one decode step of the edited talker, from its own weights: the step
    input (codec embeddings of a random frame + the projected tts_pad text), layer writes into the
    residual stream, the final RMS norm, the head."""
    import torch

    t = cfg["talker_config"]
    codes = torch.randint(0, 2048, (t["num_code_groups"],), generator=gen)
    x = w["talker.model.codec_embedding.weight"][codes[0]].clone()
    for g in range(t["num_code_groups"] - 1):
        x += w[f"talker.code_predictor.model.codec_embedding.{g}.weight"][codes[g + 1]]
    pad = w["talker.model.text_embedding.weight"][cfg["tts_pad_token_id"]]
    hidden = torch.nn.functional.silu(w["talker.text_projection.linear_fc1.weight"] @ pad
                                      + w["talker.text_projection.linear_fc1.bias"])
    x += w["talker.text_projection.linear_fc2.weight"] @ hidden + w["talker.text_projection.linear_fc2.bias"]
    for i in range(t["num_hidden_layers"]):
        o, d = w[f"talker.model.layers.{i}.self_attn.o_proj.weight"], w[f"talker.model.layers.{i}.mlp.down_proj.weight"]
        x += o @ torch.randn(o.shape[1], generator=gen) + d @ torch.randn(d.shape[1], generator=gen)
    x = x / x.pow(2).mean().sqrt() * w["talker.model.norm.weight"]
    return w["talker.codec_head.weight"] @ x


def test_a_stopping_talker_says_eos_after_about_the_asked_number_of_frames():
    import torch

    from omnicli.vllm_omni.checkpoints import _TINY, _qwen3_config, _talker_weights, make_talker_stop

    cfg = _qwen3_config(_TINY, "base", 262)
    eos = cfg["talker_config"]["codec_eos_token_id"]
    plain = _talker_weights(cfg, torch.Generator().manual_seed(0))
    stopping = {k: v.clone() for k, v in plain.items()}
    make_talker_stop(stopping, cfg, mean_frames=25)
    gen = torch.Generator().manual_seed(1)

    def eos_chance(weights: dict) -> float:
        """P(EOS) per step under the build's sampling (temperature 0.9, top-k 50, codec ids 1..2047 + EOS)."""
        chances = []
        for _ in range(200):
            logits = _decode_step_logits(weights, cfg, gen)
            allowed = torch.cat([logits[1:2048], logits[eos:eos + 1]])
            top = torch.topk(allowed / 0.9, 50)
            probs = torch.softmax(top.values, 0)
            chances.append(float(probs[top.indices == allowed.numel() - 1].sum()))
        return sum(chances) / len(chances)

    assert eos_chance(plain) < 0.005  # the plain random talker: (almost) never a stop
    chance = eos_chance(stopping)
    assert 1 / 25 * 0.8 < chance < 1 / 25 * 1.25, chance  # a mean length of about 25 frames
    changed = [k for k in plain if not torch.equal(plain[k], stopping[k])]
    assert "talker.codec_head.weight" in changed and len(changed) < len(plain)  # the rest of the talker is untouched
    with pytest.raises(ValueError, match="above 1"):
        make_talker_stop(stopping, cfg, mean_frames=1)


@needs_vllm_omni
def test_the_talker_builds_its_embeddings_in_the_model_dtype():
    import torch

    from omnicli.vllm_omni.cpu_workers import align_embedding_dtype

    class Builder:
        _embedding_dtype = torch.bfloat16

    class Talker(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._embedding_dtype = torch.bfloat16
            self._prompt_builder = Builder()
            self.layer = torch.nn.Linear(2, 2)

    model = torch.nn.Sequential(Talker())
    assert align_embedding_dtype(model, torch.float32) == ["0", "0._prompt_builder"]
    assert model[0]._embedding_dtype == model[0]._prompt_builder._embedding_dtype == torch.float32
    assert align_embedding_dtype(model, torch.float32) == []  # nothing left to change
    buffer = torch.zeros(4, 3)  # the runner's inputs_embeds in the model dtype: the batched step's copy now works
    buffer.index_copy_(0, torch.tensor([1, 3]), torch.ones(2, 3, dtype=model[0]._embedding_dtype))
    assert float(buffer.sum()) == 6.0



def test_large_weights_are_written_as_shards_with_an_index(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    from omnicli.vllm_omni import checkpoints

    weights = {f"talker.w{i}": torch.full((64, 64), float(i), dtype=torch.bfloat16) for i in range(5)}  # 8 KiB each
    (tmp_path / "one").mkdir()
    assert checkpoints._save_weights(tmp_path / "one", weights) == ["model.safetensors"]  # under one shard
    monkeypatch.setattr(checkpoints, "_SHARD_BYTES", 20_000)  # two tensors per shard
    (tmp_path / "many").mkdir()
    files = checkpoints._save_weights(tmp_path / "many", weights)
    assert files == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)] + ["model.safetensors.index.json"]
    index = json.loads((tmp_path / "many" / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 5 * 64 * 64 * 2
    assert sorted(index["weight_map"]) == sorted(weights)
    for name, w in weights.items():
        back = load_file(str(tmp_path / "many" / index["weight_map"][name]))[name]
        assert back.dtype == torch.bfloat16 and torch.equal(back, w)
    assert ("model.safetensors", "model.safetensors.index.json") in checkpoints.QWEN3_TTS.required  # accepted


def test_the_stop_channel_keeps_the_final_norm_at_real_size():
    """At 0.6B the layers' random writes put about 1.2e4 of energy into the other channels before the final
    norm (0.12 in the tiny talker): a level of 10 left EOS at a tenth of its logit and no request stopped."""
    import torch

    from omnicli.vllm_omni.checkpoints import _STOP_LEVEL, _stop_level

    assert _stop_level(64) == _STOP_LEVEL  # the tiny build is unchanged
    level = _stop_level(1024)
    assert float(torch.tensor(level, dtype=torch.bfloat16)) == level  # exact in the real build's dtype
    assert level**2 / (level**2 + 1.2e4) > 0.9998
