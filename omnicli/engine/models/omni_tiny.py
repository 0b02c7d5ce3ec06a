"""`omni-tiny`: the embedded default model, built from a seed on first use.

Its weights are random, so it speaks no words; it exists so that every path
of the toolkit (vLLM talker, streaming codec, reference encoding, metrics)
runs and is benchmarked on any machine without a download.

Talker: a Llama decoder (vLLM runs it as `LlamaForCausalLM`) over a vocabulary
of text bytes, a few specials and K=4 codebooks of 256 codec tokens; a frame
is K consecutive tokens (flattened codebook pattern). Codec: see codec.py.

Stop rule: a duration model. An utterance of `text` is
`round(bytes(text) * 12.5 / 14)` frames long (about 14 bytes of text per
second of speech, at 12.5 frames/s), so durations follow the text length;
the talker is asked for exactly that many tokens and finishes with reason
`stop`. When the request's `max_new_tokens` is smaller the talker is cut off
there and the request finishes with reason `length` (a hit cap).
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.engine.models.base import ModelAdapter
from omnicli.engine.models.codec import CodecConfig, StreamingCodec, count_parameters
from omnicli.runtime.cache import cache_dir

log = logging.getLogger(__name__)

NAME = "omni-tiny"
BUILD_VERSION = 1  # bump when the architecture or build recipe changes
DEFAULT_SEED = 1234

# Vocabulary layout.
PAD, BOS, EOS, REF_TEXT, TEXT, REF_AUDIO, AUDIO_START = range(256, 263)
CODEC_OFFSET = 264
NUM_CODEBOOKS = 4
CODEBOOK_SIZE = 256
VOCAB_SIZE = 1344  # CODEC_OFFSET + 4 * 256 = 1288, padded to a multiple of 64

BYTES_PER_SECOND = 14.0
MAX_TEXT_BYTES = 500
MAX_REF_SECONDS = 15.0

TALKER_CONFIG: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=384,
    intermediate_size=1024,
    num_hidden_layers=6,
    num_attention_heads=6,
    num_key_value_heads=2,
    head_dim=64,  # vLLM's CPU attention needs head_dim >= 32
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    bos_token_id=BOS,
    eos_token_id=EOS,
    pad_token_id=PAD,
)


def model_dir(seed: int = DEFAULT_SEED) -> Path:
    return cache_dir() / "models" / f"{NAME}-v{BUILD_VERSION}-seed{seed}"


def build(seed: int = DEFAULT_SEED, force: bool = False) -> Path:
    """Builds the model into the cache (once; concurrent callers wait on a lock)."""
    dest = model_dir(seed)
    if (dest / "BUILD_OK").exists() and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / "BUILD_OK").exists() and not force:
            return dest
        tmp = dest.parent / f".{dest.name}.building"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        info = _build_into(tmp, seed)
        info["build_seconds"] = round(time.perf_counter() - t0, 2)
        (tmp / "BUILD_OK").write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)  # the finished build appears whole or not at all
        log.info("built %s in %.1fs at %s", NAME, info["build_seconds"], dest)
    return dest


def _build_into(path: Path, seed: int) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    path.mkdir(parents=True)
    torch.manual_seed(seed)
    talker = LlamaForCausalLM(LlamaConfig(**TALKER_CONFIG))
    talker.save_pretrained(path / "talker", safe_serialization=True)

    torch.manual_seed(seed + 1)
    cfg = CodecConfig(num_codebooks=NUM_CODEBOOKS, codebook_size=CODEBOOK_SIZE)
    codec = StreamingCodec(cfg).eval()
    # Calibrate the output gain so random codes give speech-like levels
    # (about -20 dBFS RMS): neither near-silent nor clipped.
    probe = torch.randint(0, CODEBOOK_SIZE, (64, NUM_CODEBOOKS), generator=torch.Generator().manual_seed(seed))
    for _ in range(3):
        rms = codec.decoder.decode_full(probe).pow(2).mean().sqrt().item()
        codec.decoder.gain.mul_(0.1 / max(rms, 1e-6))
    cfg.output_gain = float(codec.decoder.gain)
    save_file({k: v.contiguous() for k, v in codec.state_dict().items()}, str(path / "codec.safetensors"))
    (path / "codec.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    return {
        "model": NAME,
        "seed": seed,
        "build_version": BUILD_VERSION,
        "talker_parameters": count_parameters(talker),
        "codec_parameters": count_parameters(codec),
        "codec_decoder_parameters": count_parameters(codec.decoder),
    }


class OmniTinyAdapter(ModelAdapter):
    name = NAME
    sample_rate = 24000
    channels = 1
    frame_rate = 12.5
    num_codebooks = NUM_CODEBOOKS
    max_text_bytes = MAX_TEXT_BYTES
    codec: StreamingCodec

    def __init__(self, path: Path, codec_dtype: str = "float32"):
        import torch
        from safetensors.torch import load_file

        self.path = path
        self.talker_path = path / "talker"
        self.build_info = json.loads((path / "BUILD_OK").read_text())
        cfg = CodecConfig(**json.loads((path / "codec.json").read_text()))
        codec = StreamingCodec(cfg)
        codec.load_state_dict(load_file(str(path / "codec.safetensors")))
        self.codec = codec.eval().to(getattr(torch, codec_dtype))
        self.max_ref_samples = int(MAX_REF_SECONDS * self.sample_rate)

    @classmethod
    def load(cls, seed: int = DEFAULT_SEED, codec_dtype: str = "float32") -> "OmniTinyAdapter":
        return cls(build(seed), codec_dtype=codec_dtype)

    def build_prompt(
        self, text: str, ref_text: str, ref_codes: np.ndarray | None, voice: str | None = None
    ) -> list[int]:
        prompt = [BOS, REF_TEXT, *ref_text.encode("utf-8"), TEXT, *text.encode("utf-8"), REF_AUDIO]
        if ref_codes is not None and len(ref_codes):
            offsets = CODEC_OFFSET + CODEBOOK_SIZE * np.arange(NUM_CODEBOOKS)
            prompt += (ref_codes + offsets).reshape(-1).tolist()
        prompt.append(AUDIO_START)
        return prompt

    def allowed_token_ids(self) -> list[int]:
        return list(range(CODEC_OFFSET, CODEC_OFFSET + NUM_CODEBOOKS * CODEBOOK_SIZE))

    def tokens_to_codes(self, token_ids: np.ndarray) -> np.ndarray:
        # Any codec token is accepted at any position of a frame; its code is
        # its index within its codebook.
        codes = (np.asarray(token_ids, dtype=np.int64) - CODEC_OFFSET) % CODEBOOK_SIZE
        return codes.reshape(-1, NUM_CODEBOOKS)

    def target_tokens(self, text: str) -> int:
        frames = max(2, round(len(text.encode("utf-8")) * self.frame_rate / BYTES_PER_SECOND))
        return frames * NUM_CODEBOOKS


def load_adapter(*, seed: int | None, codec_dtype: str, **_checkpoints: object) -> OmniTinyAdapter:
    """The family registry's loader (omnicli.families): omni-tiny needs no checkpoints, only its seed."""
    return OmniTinyAdapter.load(DEFAULT_SEED if seed is None else seed, codec_dtype)
