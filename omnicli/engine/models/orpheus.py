"""Orpheus TTS (Canopy Labs): a Llama 3.2 talker over SNAC 24 kHz codes.

Prompt (finetuned model): `[start_of_human] + tokenizer("{voice}: {text}")
+ [end_of_text, end_of_human, start_of_ai, start_of_speech]`, where the
tokenizer adds its own <|begin_of_text|>. This is the id sequence the
reference package builds before it turns it back into a string for vLLM;
we hand the ids to vLLM directly.

Generation: 7 tokens per 85.3 ms frame; token `128266 + (i % 7) * 4096 +
code` carries the code of position i (the band a token falls in names its
position in the frame). Generation stops at end_of_speech (128258). One
reference package defaults to stop id 49158, which is not a token of this
vocabulary's speech range: a known bug we do not reproduce.

Per request, a `voice` (a manifest row's) wins over the profile's.

Pretrained model (`model_options.mode: pretrained`): no voice names; a
request with reference audio and its transcript continues it. The
reference is an earlier turn laid out as the model's training records were
(Canopy's data preparation: one turn per utterance, consecutive frames with
the same codebook-0 code dropped): `[start_of_human] + tok(ref_text) +
[end_of_text, end_of_human, start_of_ai, start_of_speech] + reference
tokens + [end_of_speech, end_of_ai]`, then the target turn as above without
a voice. No reference package builds this prompt; the layout is the
training records' (see docs/models.md).

Codec streaming follows the reference decoder: each frame is decoded in a
window with one frame of look-back and two of look-ahead (the reference's
sliding window of 4 frames, keeping the 2nd); unlike the reference, the
first frame and the tail are emitted too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from omnicli.checkpoints import CheckpointSpec, locate, write_published_talker_config
from omnicli.engine.models.base import ModelAdapter

if TYPE_CHECKING:
    from omnicli.engine.models.snac_codec import SnacCodec

NAME = "orpheus"

# Special tokens (Llama 3 ids + Orpheus' custom tokens at 128256 + n).
BEGIN_OF_TEXT = 128000
END_OF_TEXT = 128009  # <|eot_id|>
START_OF_SPEECH = 128257
END_OF_SPEECH = 128258
START_OF_HUMAN = 128259
END_OF_HUMAN = 128260
START_OF_AI = 128261
END_OF_AI = 128262
CODE_OFFSET = 128266
CODEBOOK_SIZE = 4096
FRAME_TOKENS = 7
VOCAB_SIZE = 156940
PROMPT_SUFFIX = (END_OF_TEXT, END_OF_HUMAN, START_OF_AI, START_OF_SPEECH)
REFERENCE_END = (END_OF_SPEECH, END_OF_AI)  # closes the reference's speech turn (pretrained continuation)
MODES = ("finetuned", "pretrained")

VOICES = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")  # the finetuned model card's voices
DEFAULT_VOICE = "tara"
# Sampling defaults of the reference package (its generate call).
SAMPLING = {"temperature": 0.6, "top_p": 0.8, "top_k": -1, "repetition_penalty": 1.3}
LOOKBACK_FRAMES, LOOKAHEAD_FRAMES = 1, 2
MAX_TEXT_BYTES = 1000

TALKER = CheckpointSpec(
    "talker", "model_path", "canopylabs/orpheus-3b-0.1-ft",
    (("config.json",), ("tokenizer.json",), ("model.safetensors", "model.safetensors.index.json")),
)
CODEC = CheckpointSpec(
    "codec", "codec_path", "hubertsiuzdak/snac_24khz", (("config.json",), ("pytorch_model.bin", "model.safetensors"))
)

# The published talker config (canopylabs/orpheus-3b-0.1-ft, a Llama 3.2 3B).
REAL_TALKER: dict[str, Any] = dict(
    vocab_size=VOCAB_SIZE, hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
    num_attention_heads=24, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
    rms_norm_eps=1e-5, rope_theta=500000.0,
    rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    tie_word_embeddings=True, bos_token_id=BEGIN_OF_TEXT, eos_token_id=END_OF_TEXT, hidden_act="silu",
)
TINY_TALKER: dict[str, Any] = dict(REAL_TALKER, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=32)
# The published SNAC 24 kHz config; the tiny one narrows the networks only.
REAL_SNAC: dict[str, Any] = dict(sampling_rate=24000, encoder_dim=48, encoder_rates=[2, 4, 8, 8], decoder_dim=1024,
                 decoder_rates=[8, 8, 4, 2], attn_window_size=None, codebook_size=4096, codebook_dim=8,
                 vq_strides=[4, 2, 1], noise=True, depthwise=True)
TINY_SNAC: dict[str, Any] = dict(REAL_SNAC, encoder_dim=8, decoder_dim=64)


def special_tokens() -> list[str]:
    """Names of ids 128000.. in order: Llama 3 specials, then <custom_token_n>."""
    names = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>", 6: "<|start_header_id|>",
             7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>", 10: "<|python_tag|>"}
    llama = [names.get(i, f"<|reserved_special_token_{i}|>") for i in range(256)]
    return llama + [f"<custom_token_{n}>" for n in range(VOCAB_SIZE - 128256)]


def build_tiny(dest: Path, *, seed: int = 0, real_size: bool = False) -> dict:
    """Random-weight checkpoints in the published layout: dest/talker, dest/codec."""
    import torch
    from snac import SNAC
    from transformers import LlamaConfig, LlamaForCausalLM

    from omnicli.engine.models import tiny_tokenizer

    torch.manual_seed(seed)
    cfg = LlamaConfig(**(REAL_TALKER if real_size else TINY_TALKER))
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in the published dtype: half the memory of float32 then a cast
    try:
        talker = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default_dtype)
    talker.save_pretrained(dest / "talker", safe_serialization=True)
    write_published_talker_config(
        dest / "talker" / "config.json", rope_theta=REAL_TALKER["rope_theta"], keep_rope_scaling=True
    )
    tiny_tokenizer.build(dest / "talker", regular_size=128000, added=special_tokens(),
                         bos="<|begin_of_text|>", eos="<|eot_id|>")
    torch.manual_seed(seed + 1)
    snac_cfg = REAL_SNAC if real_size else TINY_SNAC
    snac = SNAC(**snac_cfg)
    (dest / "codec").mkdir(parents=True, exist_ok=True)
    (dest / "codec" / "config.json").write_text(json.dumps(snac_cfg, indent=2) + "\n")
    torch.save(snac.state_dict(), dest / "codec" / "pytorch_model.bin")
    return {"family": NAME, "talker_parameters": sum(p.numel() for p in talker.parameters()),
            "codec_parameters": sum(p.numel() for p in snac.parameters())}


def dedup_frames(codes: np.ndarray) -> np.ndarray:
    """Drops each frame whose codebook-0 code equals the last kept frame's, as Canopy's
    training-data preparation does (so a reference looks like what the model learned from)."""
    codes = np.asarray(codes, np.int64).reshape(-1, FRAME_TOKENS)
    keep, last = [], None
    for i, c0 in enumerate(codes[:, 0].tolist()):
        if c0 != last:
            keep.append(i)
            last = c0
    return codes[keep]


class OrpheusAdapter(ModelAdapter):
    name = NAME
    sample_rate = 24000
    channels = 1
    num_codebooks = FRAME_TOKENS  # talker tokens per frame
    max_text_bytes = MAX_TEXT_BYTES
    codec: SnacCodec

    def __init__(
        self, talker_path: Path, codec_path: Path, *, codec_dtype: str = "float32", options: dict | None = None
    ):
        from tokenizers import Tokenizer

        from omnicli.engine.models.snac_codec import SnacCodec, load_snac

        options = dict(options or {})
        self.talker_path = talker_path
        self.codec_path = codec_path
        self.tokenizer = Tokenizer.from_file(str(talker_path / "tokenizer.json"))
        self.mode = str(options.pop("mode", "finetuned"))
        if self.mode not in MODES:
            raise ValueError(f"model_options.mode for {NAME} must be one of {', '.join(MODES)}; got {self.mode!r}")
        pretrained = self.mode == "pretrained"
        if pretrained and options.get("voice"):
            raise ValueError(
                f"model_options.voice applies to the finetuned {NAME} model only; the pretrained one has no "
                "named voices"
            )
        self.voice = str(options.pop("voice", "" if pretrained else DEFAULT_VOICE) or "")
        # The finetuned model speaks in named voices and ignores reference audio;
        # the pretrained one continues a reference and has no voice names.
        self.uses_voice = not pretrained
        self.uses_reference = pretrained
        noise = bool(options.pop("codec_noise", True))
        self.sampling = {k: options.pop(k, v) for k, v in SAMPLING.items()}
        options.pop("seed", None)
        if options:
            raise ValueError(f"unknown model_options for {NAME}: {', '.join(sorted(options))} "
                             "(known: mode, voice, codec_noise, temperature, top_p, top_k, repetition_penalty)")
        self._check_ids()
        snac = load_snac(codec_path, noise=noise, dtype="float32" if codec_dtype == "float64" else codec_dtype)
        self.codec = SnacCodec(snac, lookback=LOOKBACK_FRAMES, lookahead=LOOKAHEAD_FRAMES)
        self.sample_rate = self.codec.sample_rate
        self.frame_rate = self.sample_rate / self.codec.hop
        self.max_ref_samples = 20 * self.sample_rate

    @classmethod
    def load(
        cls, model_path: str | None, codec_path: str | None, *, codec_dtype: str = "float32",
        options: dict | None = None,
    ) -> OrpheusAdapter:
        return cls(locate(TALKER, model_path, NAME), locate(CODEC, codec_path, NAME), codec_dtype=codec_dtype,
                   options=options)

    def _check_ids(self) -> None:
        """The checkpoint's tokenizer must put Orpheus' specials where the prompt layout expects them."""
        expect = {"<custom_token_3>": START_OF_HUMAN, "<custom_token_2>": END_OF_SPEECH, "<|eot_id|>": END_OF_TEXT,
                  "<|begin_of_text|>": BEGIN_OF_TEXT, "<custom_token_10>": CODE_OFFSET}
        wrong = {t: self.tokenizer.token_to_id(t) for t, i in expect.items() if self.tokenizer.token_to_id(t) != i}
        if wrong:
            raise ValueError(
                f"{self.talker_path}/tokenizer.json is not an Orpheus tokenizer: token ids {wrong} differ from {expect}"
            )

    # -- prompt and tokens ----------------------------------------------------
    def build_prompt(
        self, text: str, ref_text: str, ref_codes: np.ndarray | None, voice: str | None = None
    ) -> list[int]:
        if self.mode == "pretrained":
            return self._continuation(text, ref_text, ref_codes)
        # The finetuned model speaks in a named voice (the request's, else the profile's); reference audio is ignored.
        voice = voice or self.voice
        return self._human_turn(f"{voice}: {text}" if voice else text)

    def _human_turn(self, text: str) -> list[int]:
        """One text turn up to where speech starts; the tokenizer adds <|begin_of_text|> itself."""
        return [START_OF_HUMAN, *self.tokenizer.encode(text).ids, *PROMPT_SUFFIX]

    def _continuation(self, text: str, ref_text: str, ref_codes: np.ndarray | None) -> list[int]:
        """Pretrained model: the reference (transcript + speech) as an earlier turn, then `text`."""
        if ref_codes is None or not len(ref_codes):
            return self._human_turn(text)  # plain text-conditioned generation
        if not ref_text.strip():
            raise ValueError(
                f"pretrained {NAME} continues a reference: the reference audio needs its transcript (prompt_text "
                "/ ref_text)"
            )
        ref_tokens = self.codes_to_tokens(dedup_frames(ref_codes)).tolist()
        return [*self._human_turn(ref_text), *ref_tokens, *REFERENCE_END, *self._human_turn(text)]

    def allowed_token_ids(self) -> list[int]:
        return [*range(CODE_OFFSET, CODE_OFFSET + FRAME_TOKENS * CODEBOOK_SIZE), END_OF_SPEECH]

    def stop_token_ids(self) -> list[int]:
        return [END_OF_SPEECH]

    def keep_tokens(self, token_ids: list[int]) -> list[int]:
        return [t for t in token_ids if CODE_OFFSET <= t < CODE_OFFSET + FRAME_TOKENS * CODEBOOK_SIZE]

    def tokens_to_codes(self, token_ids: np.ndarray) -> np.ndarray:
        # The reference subtracts the band of position i; a token in another
        # band (only random weights produce them) keeps its index within its band.
        return ((np.asarray(token_ids, dtype=np.int64) - CODE_OFFSET) % CODEBOOK_SIZE).reshape(-1, FRAME_TOKENS)

    def codes_to_tokens(self, codes: np.ndarray) -> np.ndarray:
        bands = CODE_OFFSET + CODEBOOK_SIZE * np.arange(FRAME_TOKENS)
        return (np.asarray(codes, np.int64) + bands).reshape(-1)

    def target_tokens(self, text: str) -> int | None:
        return None  # the stop token ends the utterance

    def sampling_overrides(self) -> dict[str, object]:
        return dict(self.sampling)


def load_adapter(*, model_path: str | None, codec_path: str | None, codec_dtype: str, options: dict | None,
                 **_seed: object) -> OrpheusAdapter:
    """The family registry's loader (omnicli.families)."""
    return OrpheusAdapter.load(model_path, codec_path, codec_dtype=codec_dtype, options=options)
