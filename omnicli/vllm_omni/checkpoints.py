"""The vLLM-Omni families' checkpoints: what each needs on disk, and random-weight builds.

A checkpoint is one folder (vLLM-Omni loads every stage from it): a local
folder or a Hugging Face repository id found in the offline cache, exactly as
for the native families (`omnicli.checkpoints`); nothing is
downloaded.

`build_tiny_qwen3_tts` writes a Qwen3-TTS checkpoint in the published layout
(`config.json`, tokenizer files, `generation_config.json`, `model.safetensors`
with the talker, code predictor and, for Base, speaker encoder under their
published names, and `speech_tokenizer/` with the 12 Hz codec's config,
feature-extractor config and weights) with random weights, so vLLM-Omni's own
weight loading runs on it. The architecture is the published one; only the
sizes shrink, and the special codec ids stay at the published values
(vLLM-Omni's pipeline hard-codes the stop id 2150).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnicli.checkpoints import CheckpointSpec, locate

QWEN3_TTS_KINDS = {"base": "Base", "custom_voice": "CustomVoice", "voice_design": "VoiceDesign"}

_QWEN3_FILES = (
    ("config.json",),
    ("tokenizer.json", "vocab.json"),
    ("tokenizer_config.json",),
    ("model.safetensors", "model.safetensors.index.json"),
    ("speech_tokenizer/config.json",),
    ("speech_tokenizer/preprocessor_config.json",),
    ("speech_tokenizer/model.safetensors", "speech_tokenizer/model.safetensors.index.json"),
)

QWEN3_TTS = CheckpointSpec(
    role="checkpoint", profile_key="model_path", default_repo="Qwen/Qwen3-TTS-12Hz-0.6B-Base", required=_QWEN3_FILES
)
# MOSS-TTS-Local v1.5 ships remote code (its processor, which vLLM-Omni's request adapter calls) beside
# the weights, and decodes with a separate audio tokenizer checkpoint (MOSS-Audio-Tokenizer-v2).
MOSS_TTS_LOCAL = CheckpointSpec(
    role="checkpoint",
    profile_key="model_path",
    default_repo="OpenMOSS-Team/MOSS-TTS-Local-Transformer-v1.5",
    required=(
        ("config.json",),
        ("tokenizer.json", "vocab.json"),
        ("tokenizer_config.json",),
        ("model.safetensors", "model.safetensors.index.json"),
        ("processor_config.json",),
        ("processing_moss_tts.py",),
    ),
)
MOSS_AUDIO_TOKENIZER = CheckpointSpec(
    role="codec",
    profile_key="codec_path",
    default_repo="OpenMOSS-Team/MOSS-Audio-Tokenizer-v2",
    required=(("config.json",), ("model.safetensors", "model.safetensors.index.json")),
)


def qwen3_tts_specs() -> list[CheckpointSpec]:
    return [QWEN3_TTS]


def moss_tts_local_specs() -> list[CheckpointSpec]:
    return [MOSS_TTS_LOCAL, MOSS_AUDIO_TOKENIZER]


_SPECS = {"qwen3-tts": QWEN3_TTS, "moss-tts-local": MOSS_TTS_LOCAL}
_CODEC_SPECS = {"moss-tts-local": MOSS_AUDIO_TOKENIZER}


def locate_checkpoint(family: str, model_path: str | None) -> Path:
    """The folder holding the family's whole checkpoint; CheckpointMissing (exit 2) names every place looked."""
    return locate(_SPECS[family], model_path, family)


def locate_codec(family: str, codec_path: str | None) -> Path | None:
    """The family's separate codec checkpoint (MOSS's audio tokenizer), or None where the checkpoint holds it."""
    spec = _CODEC_SPECS.get(family)
    return None if spec is None else locate(spec, codec_path, family)


# --- Qwen3-TTS random-weight builds -------------------------------------------------

# Published special codec ids (talker vocabulary 3072: codes 0..2047, then specials).
_CODEC_IDS = {
    "codec_pad_id": 2148, "codec_bos_id": 2149, "codec_eos_token_id": 2150,
    "codec_think_id": 2154, "codec_nothink_id": 2155, "codec_think_bos_id": 2156, "codec_think_eos_id": 2157,
}
_LANGUAGES = {"english": 2050, "chinese": 2055}
_SPEAKERS = {"vivian": 3000, "ryan": 3001}  # CustomVoice only; ids chosen in the unused range
# Text specials after the regular vocabulary, in the published order.
_TEXT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]

_TINY: dict[str, Any] = {
    "text_regular": 256,  # byte-level symbols
    "talker": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 1, "head_dim": 32, "text_hidden_size": 64},
    "predictor": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "num_key_value_heads": 1, "head_dim": 32},
    "mrope_section": [6, 5, 5],  # sums to head_dim / 2
    "speaker": {"enc_channels": [32, 32, 32, 32, 96], "enc_attention_channels": 16, "enc_se_channels": 16},
    # Mimi encoder: `upsample_groups` must equal its hidden size.
    "encoder": {"hidden_size": 32, "num_filters": 8, "codebook_dim": 16, "vector_quantization_hidden_dimension": 16,
                "num_quantizers": 16, "upsample_groups": 32, "num_hidden_layers": 1, "intermediate_size": 64,
                "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16},
    # Decoder: an explicit `codebook_dim` (its default is not in the class signature).
    "decoder": {"hidden_size": 32, "latent_dim": 32, "codebook_dim": 16, "num_hidden_layers": 1,
                "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 64, "decoder_dim": 32},
}
# Qwen3-TTS-12Hz-0.6B dimensions (the text vocabulary keeps the published 151,936 ids).
_REAL: dict[str, Any] = {
    "text_regular": 151643,
    "talker": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
               "num_key_value_heads": 8, "head_dim": 128, "text_hidden_size": 2048},
    "predictor": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 5, "num_attention_heads": 16,
                  "num_key_value_heads": 8, "head_dim": 128},
    "mrope_section": [24, 20, 20],
    "speaker": {},
    "encoder": {"codebook_dim": 256, "num_quantizers": 32, "upsample_groups": 512},
    "decoder": {"codebook_dim": 512},
}


def _qwen3_config(sizes: dict, kind: str, text_vocab_size: int) -> dict:
    talker = dict(sizes["talker"])
    talker.update(
        vocab_size=3072, num_code_groups=16, text_vocab_size=text_vocab_size, hidden_act="silu",
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000,
        rope_scaling={"rope_type": "default", "mrope_section": sizes["mrope_section"], "interleaved": True},
        codec_language_id=dict(_LANGUAGES), **_CODEC_IDS,
        code_predictor_config={**sizes["predictor"], "vocab_size": 2048, "num_code_groups": 16,
                               "max_position_embeddings": 65536, "rms_norm_eps": 1e-6, "rope_theta": 1000000},
    )
    if kind == "custom_voice":
        talker["spk_id"] = dict(_SPEAKERS)
        talker["spk_is_dialect"] = {name: False for name in _SPEAKERS}
    else:
        talker["spk_id"], talker["spk_is_dialect"] = {}, {}
    first = sizes["text_regular"]
    return {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": "0b6",
        "tts_model_type": kind,
        "im_start_token_id": first + 1,
        "im_end_token_id": first + 2,
        "tts_pad_token_id": first + 3,
        "tts_bos_token_id": first + 4,
        "tts_eos_token_id": first + 5,
        "talker_config": talker,
        "speaker_encoder_config": {"enc_dim": talker["hidden_size"], "sample_rate": 24000, **sizes["speaker"]},
        "torch_dtype": "float32",
    }


def _decoder_layer_weights(prefix: str, c: dict, randn, ones) -> dict:
    """One Qwen3 decoder layer under its published parameter names."""
    h, d, i = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    return {
        f"{prefix}.self_attn.q_proj.weight": randn(q, h), f"{prefix}.self_attn.k_proj.weight": randn(kv, h),
        f"{prefix}.self_attn.v_proj.weight": randn(kv, h), f"{prefix}.self_attn.o_proj.weight": randn(h, q),
        f"{prefix}.self_attn.q_norm.weight": ones(d), f"{prefix}.self_attn.k_norm.weight": ones(d),
        f"{prefix}.mlp.gate_proj.weight": randn(i, h), f"{prefix}.mlp.up_proj.weight": randn(i, h),
        f"{prefix}.mlp.down_proj.weight": randn(h, i),
        f"{prefix}.input_layernorm.weight": ones(h), f"{prefix}.post_attention_layernorm.weight": ones(h),
    }


def _talker_weights(cfg: dict, generator, dtype: str = "float32") -> dict:
    """The talker and its code predictor, named as the published `model.safetensors` names them.

    `dtype`: how they are stored (drawn in float32 either way, so a bfloat16 build holds the same
    values rounded); the real-size build uses bfloat16, as published, to halve its memory and disk."""
    import torch

    kind = getattr(torch, dtype)

    def randn(*shape):
        return (torch.randn(*shape, generator=generator) * 0.02).to(kind)

    def ones(n):
        return torch.ones(n, dtype=kind)

    t, p = cfg["talker_config"], cfg["talker_config"]["code_predictor_config"]
    h, th, groups = t["hidden_size"], t["text_hidden_size"], t["num_code_groups"]
    w = {
        "talker.model.codec_embedding.weight": randn(t["vocab_size"], h),
        "talker.model.text_embedding.weight": randn(t["text_vocab_size"], th),
        "talker.model.norm.weight": ones(h),
        "talker.text_projection.linear_fc1.weight": randn(th, th), "talker.text_projection.linear_fc1.bias": randn(th),
        "talker.text_projection.linear_fc2.weight": randn(h, th), "talker.text_projection.linear_fc2.bias": randn(h),
        "talker.codec_head.weight": randn(t["vocab_size"], h),
        "talker.code_predictor.model.norm.weight": ones(p["hidden_size"]),
    }
    for i in range(t["num_hidden_layers"]):
        w.update(_decoder_layer_weights(f"talker.model.layers.{i}", t, randn, ones))
    for i in range(p["num_hidden_layers"]):
        w.update(_decoder_layer_weights(f"talker.code_predictor.model.layers.{i}", p, randn, ones))
    for g in range(groups - 1):  # one embedding and one head per residual codebook
        w[f"talker.code_predictor.model.codec_embedding.{g}.weight"] = randn(p["vocab_size"], h)
        w[f"talker.code_predictor.lm_head.{g}.weight"] = randn(p["vocab_size"], p["hidden_size"])
    if p["hidden_size"] != h:
        w["talker.code_predictor.small_to_mtp_projection.weight"] = randn(p["hidden_size"], h)
        w["talker.code_predictor.small_to_mtp_projection.bias"] = randn(p["hidden_size"])
    return w


def _speaker_encoder_weights(cfg: dict, seed: int) -> dict:
    import torch
    from vllm_omni.model_executor.models.common.ecapa_tdnn import ECAPATimeDelayNet
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig

    torch.manual_seed(seed)
    net = ECAPATimeDelayNet(Qwen3TTSSpeakerEncoderConfig(**cfg["speaker_encoder_config"]))
    return {f"speaker_encoder.{k}": v.detach().clone() for k, v in net.state_dict().items()}


def _write_speech_tokenizer(folder: Path, sizes: dict, seed: int) -> int:
    """speech_tokenizer/: the 12 Hz codec (Mimi encoder + Qwen3-TTS decoder) with random weights."""
    import torch
    from safetensors.torch import save_file
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    cfg = Qwen3TTSTokenizerV2Config(
        encoder_config={**sizes["encoder"], "codebook_size": 2048, "sampling_rate": 24000, "frame_rate": 12.5},
        decoder_config={**sizes["decoder"], "codebook_size": 2048, "num_quantizers": 16, "sliding_window": 72,
                        "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2]},
        encoder_valid_num_quantizers=16, input_sample_rate=24000, output_sample_rate=24000,
        decode_upsample_rate=1920, encode_downsample_rate=1920,
    )
    torch.manual_seed(seed)
    model = Qwen3TTSTokenizerV2Model(cfg).eval()
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    # A fresh quantizer's codebooks are all zero: every reference would encode to code 0 and every
    # code decode to silence. Random centroids for both the encoder's and the decoder's codebooks.
    gen = torch.Generator().manual_seed(seed)
    for name in list(state):
        if name.endswith((".embed_sum", ".embedding_sum")):
            state[name] = torch.randn(state[name].shape, generator=gen)
        elif name.endswith(".initialized"):
            state[name] = torch.ones_like(state[name])
    _scale_output(model, state, gen)
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save_pretrained(folder)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1, "sampling_rate": 24000,
        "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
        "chunk_length_s": None, "overlap": None,
    }, indent=2) + "\n")
    return sum(v.numel() for k, v in state.items() if not k.endswith((".initialized", ".cluster_usage")))


def _scale_output(model, state: dict, gen, peak: float = 0.5) -> None:
    """Random small-init layers leave the waveform near 1e-8: scale the decoder's last convolution so
    random codes decode to a peak of `peak` (audio a level meter and an ASR model can work with)."""
    import torch

    model.load_state_dict(state)
    codes = torch.randint(0, 2048, (1, 16, 24), generator=gen)
    with torch.no_grad():
        got = float(model.decoder(codes).abs().max())
    last = max(int(k.split(".")[2]) for k in state if k.startswith("decoder.decoder.") and k.split(".")[2].isdigit())
    for name in (f"decoder.decoder.{last}.conv.weight", f"decoder.decoder.{last}.conv.bias"):
        state[name] = state[name] * (peak / got)


# The hidden dimension `make_talker_stop` reserves as a constant (the "stop" channel).
_STOP_DIM = 0
_STOP_LEVEL = 10.0  # its value in every input embedding of the tiny talker (hidden 64): it dominates the final norm


def _stop_level(hidden: int) -> float:
    """The stop channel's value: large enough to hold nearly all of the final norm's input at any size.

    The layers' random writes into the other channels grow with width and depth: at the final norm their
    energy is about 0.12 for the tiny talker and 1.2e4 for the 0.6B one (28 layers, hidden 1024). A level
    of 10 then left the channel at 2.9 after the norm instead of 32 (EOS at a tenth of its logit) while
    the code logits spread to 0.6 (max 2): none of 3 real-size requests stopped within 98 frames. At
    10 x (hidden / 64)^2.5 (10 tiny, 10,240 real, exact in bfloat16) the channel keeps over 99.98% and the
    code logits stay below 0.03."""
    return _STOP_LEVEL * (hidden / 64) ** 2.5


def make_talker_stop(weights: dict, cfg: dict, mean_frames: float) -> float:
    """Edits random talker `weights` in place so the talker says codec EOS after about `mean_frames` frames.

    A random talker almost never samples EOS (1 id of 2,048), so every Base request runs into its
    budget and vLLM-Omni's server rejects it. Here one hidden dimension carries a constant: the text
    projection's bias writes it into every input embedding (prompt and decode steps alike), no codec
    embedding and no layer output touches it, so after the final norm it is the same at every step,
    and the codec head reads it only in the EOS row. That gives EOS one fixed logit while the code
    logits stay near 0: a constant per-frame chance of 1/mean_frames under the checkpoint's sampling
    (temperature, top-k of generation_config.json), so lengths are geometric with that mean.
    Returns the EOS logit chosen.
    """
    import math

    if mean_frames <= 1:
        raise ValueError(f"mean_frames must be above 1; got {mean_frames}")
    t = cfg["talker_config"]
    k, h = _STOP_DIM, t["hidden_size"]
    temperature, top_k = 0.9, 50  # the build's generation_config.json
    p = 1.0 / mean_frames
    logit = temperature * math.log(p * (top_k - 1) / (1.0 - p))
    weights["talker.text_projection.linear_fc2.weight"][k, :] = 0.0
    weights["talker.text_projection.linear_fc2.bias"][k] = _stop_level(h)
    embeddings = ("talker.model.codec_embedding.", "talker.code_predictor.model.codec_embedding.")
    writes = ("self_attn.o_proj.weight", "mlp.down_proj.weight")
    for name, w in weights.items():
        if name.startswith(embeddings):
            w[:, k] = 0.0  # codec embeddings (summed into each step's input) leave the channel alone
        elif name.startswith("talker.model.layers.") and name.endswith(writes):
            w[k, :] = 0.0  # so do the layers' writes into the residual stream
    head = weights["talker.codec_head.weight"]
    head[:, k] = 0.0
    head[t["codec_eos_token_id"], :] = 0.0
    # After the norm the channel is about sqrt(hidden) (it holds nearly all of the vector's energy).
    head[t["codec_eos_token_id"], k] = logit / math.sqrt(h)
    return logit


_SHARD_BYTES = 1 << 30  # one safetensors file up to 1 GiB; serializing copies a file's tensors once


def _save_weights(dest: Path, weights: dict) -> list[str]:
    """`model.safetensors`, or shards with `model.safetensors.index.json` (the published form for large
    checkpoints) once the weights pass one shard, so that a real-size build never holds a second copy of
    all of them while writing. Returns the files written."""
    from safetensors.torch import save_file

    shards: list[dict] = [{}]
    size = 0
    for name, w in weights.items():
        nbytes = w.numel() * w.element_size()
        if shards[-1] and size + nbytes > _SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = w.contiguous()
        size += nbytes
    if len(shards) == 1:
        save_file(shards[0], str(dest / "model.safetensors"), metadata={"format": "pt"})
        return ["model.safetensors"]
    files = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for file, shard in zip(files, shards, strict=True):
        save_file(shard, str(dest / file), metadata={"format": "pt"})
    index = {"metadata": {"total_size": sum(w.numel() * w.element_size() for w in weights.values())},
             "weight_map": {name: file for file, shard in zip(files, shards, strict=True) for name in shard}}
    (dest / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return [*files, "model.safetensors.index.json"]


def build_tiny_qwen3_tts(dest: Path, *, seed: int = 0, real_size: bool = False, kind: str = "base",
                         stop_frames: float | None = None) -> dict:
    """Writes one Qwen3-TTS checkpoint folder at `dest` (random weights, published layout).

    `stop_frames`: a talker that ends by codec EOS after about that many frames on average
    (make_talker_stop); None keeps the plain random talker (it almost never stops by itself)."""
    import torch

    from omnicli.engine.models import tiny_tokenizer

    if kind not in QWEN3_TTS_KINDS:
        raise ValueError(f"kind must be one of {', '.join(QWEN3_TTS_KINDS)}; got {kind!r}")
    sizes = _REAL if real_size else _TINY
    first = sizes["text_regular"]
    # The published ids put <|im_start|> at 151644 and the TTS specials at 151671..151673;
    # the real-size build keeps those ids, the tiny one packs them after the byte symbols.
    specials = _TEXT_SPECIALS if not real_size else (
        _TEXT_SPECIALS[:3] + [f"<|extra_{i}|>" for i in range(151646, 151671)] + _TEXT_SPECIALS[3:]
    )
    text_vocab = 151936 if real_size else first + len(specials)
    cfg = _qwen3_config(sizes, kind, text_vocab)
    if real_size:
        cfg.update(im_start_token_id=151644, im_end_token_id=151645,
                   tts_pad_token_id=151671, tts_bos_token_id=151672, tts_eos_token_id=151673,
                   torch_dtype="bfloat16")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (dest / "generation_config.json").write_text(json.dumps({
        "do_sample": True, "temperature": 0.9, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.05,
        "max_new_tokens": 8192, "subtalker_dosample": True, "subtalker_temperature": 0.9,
        "subtalker_top_k": 50, "subtalker_top_p": 1.0,
    }, indent=2) + "\n")
    tiny_tokenizer.build(dest, regular_size=first, added=specials, bos=None, eos="<|im_end|>", pad="<|endoftext|>")

    weights = _talker_weights(cfg, torch.Generator().manual_seed(seed), cfg["torch_dtype"])
    eos_logit = make_talker_stop(weights, cfg, stop_frames) if stop_frames is not None else None
    if kind == "base":  # only Base clones voices from a reference
        weights.update(_speaker_encoder_weights(cfg, seed + 1))
    files = _save_weights(dest, weights)
    parameters = sum(v.numel() for v in weights.values())
    del weights  # the real-size talker (1.8 GB) need not stay in memory while the codec is built
    codec_params = _write_speech_tokenizer(dest / "speech_tokenizer", sizes, seed + 2)
    return {
        "family": "qwen3-tts",
        "kind": kind,
        "task_type": QWEN3_TTS_KINDS[kind],
        "parameters": parameters,
        "dtype": cfg["torch_dtype"],
        "weight_files": files,
        "speech_tokenizer_parameters": codec_params,
        "speakers": sorted(cfg["talker_config"]["spk_id"]),
        "languages": sorted(_LANGUAGES),
        "stop_frames": stop_frames,
        "eos_logit": eos_logit,
    }


def build_tiny(dest: Path, *, seed: int = 0, real_size: bool = False, stop_frames: float | None = None) -> dict:
    """The registry's builder: dest/base (Base) and dest/custom_voice (CustomVoice), both with the same
    talker stop setting."""
    kinds = ("base", "custom_voice")
    info: dict = {kind: build_tiny_qwen3_tts(dest / kind, seed=seed, real_size=real_size, kind=kind,
                                             stop_frames=stop_frames) for kind in kinds}
    info["model_path_folders"] = list(kinds)
    return info


REAL_SIZE_STOP_FRAMES = 25.0  # the real-size test and benchmark: 2 s of audio per request on average


def real_size_checkpoint(cache_dir: Path, stop_frames: float = REAL_SIZE_STOP_FRAMES) -> Path:
    """The real-size Base checkpoint with a stopping talker under `cache_dir`/models/, built once and reused
    (about 30 s and 3.5 GB at peak to build, 2.7 GB on disk): what scripts/test.sh --real-size and
    scripts/bench_real_size.py run. A folder without its BUILD_OK (a build cut short) is built again."""
    root = cache_dir / "models" / f"qwen3-tts-real-size-stop{stop_frames:g}"
    done = root / "BUILD_OK"
    if not done.exists():
        info = build_tiny_qwen3_tts(root / "base", real_size=True, kind="base", stop_frames=stop_frames)
        done.write_text(json.dumps(info, indent=2) + "\n")
    return root / "base"
