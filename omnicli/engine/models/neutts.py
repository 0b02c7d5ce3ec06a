"""NeuTTS Air (Neuphonic): a Qwen2 talker over NeuCodec codes, cloning a reference voice.

Prompt (the reference package's layout, as token ids):
`tok("user: Convert the text to speech:") + [<|TEXT_PROMPT_START|>] +
tok(phonemes(ref_text) + " " + phonemes(text)) + [<|TEXT_PROMPT_END|>] +
tok("\\nassistant:") + [<|SPEECH_GENERATION_START|>] + <|speech_c|> for each
reference code c`. Phonemes come from espeak-ng (omnicli.engine.models.phonemes).
Every special and speech token id is read from the checkpoint's tokenizer,
never hard-coded; the speech tokens must be contiguous (`<|speech_0|>` ..
`<|speech_65535|>`), which is checked at load.

Generation: one speech token per 20 ms codec frame; it stops at
<|SPEECH_GENERATION_END|>. Tokens that are not speech tokens are dropped,
as the reference does when it parses the generated text.

Reference audio and its transcript are required: the reference audio is
encoded by NeuCodec at 16 kHz; its codes start the speech.

Codec streaming follows the reference package's scheme (`streaming_*`
constants of its decoder): chunks of 25 frames, each decoded in a window
of 51 frames of look-back (its 50 + its 1 overlap frame) and 5 of
look-ahead; it keeps the chunk plus one overlap frame on each side and
overlap-adds them with triangular weights, which at each boundary is a
linear cross-fade over 2 frames (960 samples) with fade-in weights
(j + 1) / 961: exactly the windowed runner's cross-fade with `overlap=2`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from omnicli.checkpoints import CheckpointSpec, locate, write_published_talker_config
from omnicli.engine.models.base import ModelAdapter

if TYPE_CHECKING:
    from torch import nn

    from omnicli.engine.models.neucodec_codec import NeuCodecCodec

NAME = "neutts-air"

TEXT_REPLACE = "<|TEXT_REPLACE|>"
SPEECH_REPLACE = "<|SPEECH_REPLACE|>"
TEXT_PROMPT_START = "<|TEXT_PROMPT_START|>"
TEXT_PROMPT_END = "<|TEXT_PROMPT_END|>"
SPEECH_GENERATION_START = "<|SPEECH_GENERATION_START|>"
SPEECH_GENERATION_END = "<|SPEECH_GENERATION_END|>"
PROMPT_HEAD = "user: Convert the text to speech:"
PROMPT_MIDDLE = "\nassistant:"
CODEBOOK_SIZE = 65536
LANGUAGE = "en-us"  # the reference package's language for neuphonic/neutts-air

# The reference package's generate call (temperature 1.0, top-k 50); its
# context is 2048 tokens, prompt included.
SAMPLING = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.0}
CHUNK_FRAMES, LOOKBACK_FRAMES, LOOKAHEAD_FRAMES, OVERLAP_FRAMES = 25, 51, 5, 2  # see the module docstring
# The engine's chunk sizes for this family (first chunks, then the steady size), used where the profile sets
# none (omnicli.engine.chunker.stream_geometry). Every chunk re-decodes up to 51 + 5 context frames, so the
# reference's 25-frame chunks decode 3.2 frames per frame of audio; a short first chunk keeps first audio
# early and long later chunks re-read less (measured: docs/engine.md, "NeuTTS Air's chunk geometry").
STREAM_GEOMETRY: tuple[tuple[int, ...], int] = ((5, 20, 75), 100)
MAX_TEXT_BYTES = 1000
MAX_REF_SECONDS = 15.0

TALKER = CheckpointSpec(
    "talker", "model_path", "neuphonic/neutts-air",
    (("config.json",), ("tokenizer.json",), ("model.safetensors", "model.safetensors.index.json")),
)
CODEC = CheckpointSpec("codec", "codec_path", "neuphonic/neucodec", (("config.json",), ("model.safetensors",)))

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
NEUTTS_SPECIALS = [
    TEXT_REPLACE,
    SPEECH_REPLACE,
    TEXT_PROMPT_START,
    TEXT_PROMPT_END,
    SPEECH_GENERATION_START,
    SPEECH_GENERATION_END,
]

# Qwen2.5-0.5B dimensions (the NeuTTS Air backbone); the vocabulary grows by the speech tokens.
# (Keyword arguments of transformers' configs: values of mixed types.)
REAL_TALKER: dict[str, Any] = dict(
    hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
    head_dim=64, max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
    hidden_act="silu", use_sliding_window=False,
)
TINY_TALKER: dict[str, Any] = dict(
    REAL_TALKER,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=4096,
)
REAL_TEXT_VOCAB, TINY_TEXT_VOCAB = 151643, 512  # regular (non-special) tokens before the added ones
# NeuCodec's published dimensions (transformers' NeuCodecConfig defaults); the tiny one narrows every network.
TINY_SEMANTIC: dict[str, Any] = dict(
    model_type="wav2vec2-bert",
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    output_hidden_size=32,
)
TINY_CODEC: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=32,
    encoder_hidden_size=4,
    quantization_dim=96,
    semantic_model_config=TINY_SEMANTIC,
)


def speech_token(code: int) -> str:
    return f"<|speech_{code}|>"


def added_tokens() -> list[str]:
    return QWEN_SPECIALS + NEUTTS_SPECIALS + [speech_token(i) for i in range(CODEBOOK_SIZE)]


def build_tiny(dest: Path, *, seed: int = 0, real_size: bool = False) -> dict:
    """Random-weight checkpoints in the published layout: dest/talker (Qwen2), dest/codec (NeuCodec)."""
    import torch
    from transformers import NeuCodecConfig, NeuCodecModel, Qwen2Config, Qwen2ForCausalLM

    from omnicli.engine.models import tiny_tokenizer

    text_vocab = REAL_TEXT_VOCAB if real_size else TINY_TEXT_VOCAB
    n_tokens = text_vocab + len(added_tokens())
    vocab = int(math.ceil(n_tokens / 128) * 128)  # padded like Qwen's embedding tables
    eos = text_vocab + QWEN_SPECIALS.index("<|im_end|>")
    torch.manual_seed(seed)
    cfg = Qwen2Config(**(REAL_TALKER if real_size else TINY_TALKER), vocab_size=vocab,
                      bos_token_id=text_vocab, eos_token_id=eos)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # the published dtype
    try:
        talker = Qwen2ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default_dtype)
    talker.save_pretrained(dest / "talker", safe_serialization=True)
    write_published_talker_config(
        dest / "talker" / "config.json", rope_theta=REAL_TALKER["rope_theta"], keep_rope_scaling=False
    )
    tiny_tokenizer.build(dest / "talker", regular_size=text_vocab, added=added_tokens(), bos=None,
                         eos="<|im_end|>", pad="<|endoftext|>")
    torch.manual_seed(seed + 1)
    codec_cfg = NeuCodecConfig() if real_size else NeuCodecConfig(**TINY_CODEC)
    codec = NeuCodecModel(codec_cfg).eval()
    _randomize(codec)
    codec.save_pretrained(dest / "codec")
    return {"family": NAME, "talker_parameters": sum(p.numel() for p in talker.parameters()),
            "codec_parameters": sum(p.numel() for p in codec.parameters()), "vocab_size": vocab}


def _randomize(model: nn.Module) -> None:
    """transformers initialises parts of NeuCodec to zero (its output is then silence): draw every matrix instead."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p[0].numel()))



class NeuTTSAdapter(ModelAdapter):
    name = NAME
    channels = 1
    num_codebooks = 1
    max_text_bytes = MAX_TEXT_BYTES
    uses_reference = True
    stream_geometry = STREAM_GEOMETRY
    codec: NeuCodecCodec

    def __init__(
        self, talker_path: Path, codec_path: Path, *, codec_dtype: str = "float32", options: dict | None = None
    ):
        from tokenizers import Tokenizer

        from omnicli.engine.models.neucodec_codec import NeuCodecCodec, load_neucodec
        from omnicli.engine.models.phonemes import Phonemizer

        options = dict(options or {})
        self.talker_path = talker_path
        self.codec_path = codec_path
        self.tokenizer = Tokenizer.from_file(str(talker_path / "tokenizer.json"))
        language = str(options.pop("language", LANGUAGE))
        self.sampling = {k: options.pop(k, v) for k, v in SAMPLING.items()}
        options.pop("seed", None)
        if options:
            raise ValueError(f"unknown model_options for {NAME}: {', '.join(sorted(options))} "
                             "(known: language, temperature, top_p, top_k, repetition_penalty)")
        self.ids = self._resolve_ids()
        self.phonemize = Phonemizer(language)
        model, features = load_neucodec(codec_path, dtype="float32" if codec_dtype == "float64" else codec_dtype)
        self.codec = NeuCodecCodec(
            model, features, lookback=LOOKBACK_FRAMES, lookahead=LOOKAHEAD_FRAMES, overlap=OVERLAP_FRAMES
        )
        self.sample_rate = self.codec.sample_rate
        self.ref_sample_rate = self.codec.input_sample_rate
        self.frame_rate = self.sample_rate / self.codec.hop
        self.max_ref_samples = int(MAX_REF_SECONDS * self.ref_sample_rate)
        self._head = self.tokenizer.encode(PROMPT_HEAD).ids  # with whatever the tokenizer adds at the start
        self._middle = self.tokenizer.encode(PROMPT_MIDDLE, add_special_tokens=False).ids

    @classmethod
    def load(
        cls, model_path: str | None, codec_path: str | None, *, codec_dtype: str = "float32",
        options: dict | None = None,
    ) -> NeuTTSAdapter:
        return cls(locate(TALKER, model_path, NAME), locate(CODEC, codec_path, NAME), codec_dtype=codec_dtype,
                   options=options)

    def _resolve_ids(self) -> dict[str, int]:
        """Special and speech token ids from the checkpoint's tokenizer; the speech range must be contiguous."""
        names = [TEXT_PROMPT_START, TEXT_PROMPT_END, SPEECH_GENERATION_START, SPEECH_GENERATION_END]
        found = {n: self.tokenizer.token_to_id(n) for n in names}
        missing = [n for n, i in found.items() if i is None]
        first, last = (
            self.tokenizer.token_to_id(speech_token(0)),
            self.tokenizer.token_to_id(speech_token(CODEBOOK_SIZE - 1)),
        )
        if missing or first is None or last is None:
            missing += [t for t, i in ((speech_token(0), first), (speech_token(CODEBOOK_SIZE - 1), last)) if i is None]
            raise ValueError(
                f"{self.talker_path}/tokenizer.json is not a NeuTTS tokenizer: it lacks {', '.join(missing)}"
            )
        probe = [self.tokenizer.token_to_id(speech_token(c)) for c in (1, 4097, 30000, CODEBOOK_SIZE - 2)]
        if last - first != CODEBOOK_SIZE - 1 or probe != [first + c for c in (1, 4097, 30000, CODEBOOK_SIZE - 2)]:
            raise ValueError(f"{self.talker_path}/tokenizer.json: the speech tokens are not contiguous ids")
        ids = {n: i for n, i in found.items() if i is not None}  # all of them: none is missing here
        ids["speech_0"] = first
        return ids

    # -- prompt and tokens ----------------------------------------------------
    def phonemes(self, ref_text: str, text: str) -> str:
        return self.phonemize(ref_text) + " " + self.phonemize(text)

    def build_prompt(
        self, text: str, ref_text: str, ref_codes: np.ndarray | None, voice: str | None = None
    ) -> list[int]:
        if ref_codes is None:
            raise ValueError(f"{NAME} clones a reference voice: every request needs reference audio and its transcript")
        phones = self.tokenizer.encode(self.phonemes(ref_text, text), add_special_tokens=False).ids
        ids = self.ids
        codes = np.asarray(ref_codes, np.int64).reshape(-1)
        return [*self._head, ids[TEXT_PROMPT_START], *phones, ids[TEXT_PROMPT_END], *self._middle,
                ids[SPEECH_GENERATION_START], *(codes + ids["speech_0"]).tolist()]

    def allowed_token_ids(self) -> list[int]:
        first = self.ids["speech_0"]
        return [*range(first, first + CODEBOOK_SIZE), self.ids[SPEECH_GENERATION_END]]

    def stop_token_ids(self) -> list[int]:
        return [self.ids[SPEECH_GENERATION_END]]

    def keep_tokens(self, token_ids: list[int]) -> list[int]:
        first = self.ids["speech_0"]
        return [t for t in token_ids if first <= t < first + CODEBOOK_SIZE]

    def tokens_to_codes(self, token_ids: np.ndarray) -> np.ndarray:
        return (np.asarray(token_ids, np.int64) - self.ids["speech_0"]).reshape(-1, 1)

    def codes_to_tokens(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(codes, np.int64).reshape(-1) + self.ids["speech_0"]

    def target_tokens(self, text: str) -> int | None:
        return None  # <|SPEECH_GENERATION_END|> ends the utterance

    def sampling_overrides(self) -> dict[str, object]:
        return dict(self.sampling)


def load_adapter(*, model_path: str | None, codec_path: str | None, codec_dtype: str, options: dict | None,
                 **_seed: object) -> NeuTTSAdapter:
    """The family registry's loader (omnicli.families)."""
    return NeuTTSAdapter.load(model_path, codec_path, codec_dtype=codec_dtype, options=options)
