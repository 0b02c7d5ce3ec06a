"""NeuTTS Air parity checks: phonemes, prompt ids, code mapping, NeuCodec encode/decode, streaming.

The reference is the `neutts` package (1.4.1), installed without its
dependencies. Its module imports `librosa` and the `neucodec` package at
the top; `neucodec` cannot load here (it needs torchaudio), so when it is
absent a stand-in module is registered first: the checks never call it.
We then call the reference's own methods on an instance we wire up
ourselves: its prompt builder (`_apply_chat_template`, with its own
phonemizer and the checkpoint's tokenizer), its token parser and decode
call (`_decode`, with transformers' NeuCodecModel as the codec), and its
streaming decoder (`_infer_stream_ggml`, fed the codes as a token stream
instead of llama.cpp output).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import sys
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from omnicli.engine.models import neutts
from omnicli.engine.windowed import WindowedRunner
from omnicli.parity.checks import (
    TEXTS,
    Check,
    boundary_jumps,
    full_decode,
    max_abs,
    run_checks,
    stream_batched,
    stream_decode,
    verdict,
)

if TYPE_CHECKING:
    from transformers import NeuCodecModel

    from omnicli.engine.models.neucodec_codec import NeuCodecCodec

REF_TEXT = "The birch canoe slid on the smooth planks."
# Our streaming may differ from the full decode by at most this multiple of the reference scheme's difference.
STREAM_SLACK = 1.25


class _CodecShim:
    """What the reference calls on its codec (`decode_code`, `.device`), backed by transformers' NeuCodecModel."""

    def __init__(self, model: NeuCodecModel) -> None:
        self.model = model
        self.device = torch.device("cpu")

    def decode_code(self, codes: torch.Tensor) -> torch.Tensor:
        return self.model.decode(audio_codes=codes).audio_values


class _TokenStream:
    """Stands in for the llama.cpp backbone of `_infer_stream_ggml`: streams fixed speech tokens."""

    def __init__(self, codes: Iterable[int]) -> None:
        self.codes = [int(c) for c in codes]

    def reset(self) -> None:
        pass

    def __call__(self, prompt: object, **kwargs: object) -> Iterator[dict[str, list[dict[str, str]]]]:
        return iter([{"choices": [{"text": neutts.speech_token(c)}]} for c in self.codes])


def reference_module() -> types.ModuleType | None:
    """The reference `neutts.neutts` module, or None when the `neutts` package is not installed."""
    if importlib.util.find_spec("neutts") is None:
        return None
    if "neucodec" not in sys.modules and importlib.util.find_spec("neucodec") is None:
        stub = types.ModuleType("neucodec")
        stub.NeuCodec = stub.DistillNeuCodec = None  # type: ignore[attr-defined]  # a stand-in: never called
        sys.modules["neucodec"] = stub
    if "librosa" not in sys.modules and importlib.util.find_spec("librosa") is None:
        sys.modules["librosa"] = types.ModuleType("librosa")  # only encode_reference (unused here) needs it
    return importlib.import_module("neutts.neutts")


def reference_instance(
    module: types.ModuleType, talker: Path, codec_model: NeuCodecModel, language: str = neutts.LANGUAGE
) -> Any:  # a neutts.NeuTTS (an untyped package)
    """A NeuTTS object with the reference's own phonemizer, the checkpoint's tokenizer and our codec model."""
    from transformers import AutoTokenizer

    ref = module.NeuTTS.__new__(module.NeuTTS)
    ref.sample_rate, ref.max_context, ref.hop_length = 24000, 2048, 480
    ref.streaming_overlap_frames, ref.streaming_frames_per_chunk = 1, 25
    ref.streaming_lookforward, ref.streaming_lookback = 5, 50
    ref.streaming_stride_samples = ref.streaming_frames_per_chunk * ref.hop_length
    ref._is_quantized_model, ref._is_onnx_codec, ref._seed, ref.watermarker = False, False, 0, None
    ref.input_format = "phonemes"
    ref.tokenizer = AutoTokenizer.from_pretrained(str(talker), local_files_only=True, trust_remote_code=False)
    with contextlib.redirect_stdout(sys.stderr):
        ref._load_phonemizer(language, None)
    ref.codec = _CodecShim(codec_model)
    return ref


def reference_stream(ref: Any, codes: np.ndarray) -> np.ndarray:
    """The reference's streaming decode of `codes` (no reference codes before them)."""
    ref.backbone = _TokenStream(codes.reshape(-1))
    with contextlib.redirect_stdout(sys.stderr), torch.no_grad():
        parts = list(ref._infer_stream_ggml([], "a", "a"))  # the texts only shape the (unused) prompt
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


N_FRAMES = 90
MISSING = "neutts not installed (pip install --no-deps neutts==1.4.1)"


@dataclass
class Setup:
    """What the checks share; `rng` is drawn from in check order, so the list's order is part of the result."""

    adapter: neutts.NeuTTSAdapter
    codec: NeuCodecCodec
    rng: np.random.Generator
    ref: Any  # the reference neutts.NeuTTS object (untyped package), None when it is not installed
    ref_codes: np.ndarray  # a random reference's codes for the prompt checks
    codes: np.ndarray  # N_FRAMES random codes the decode checks use

    @classmethod
    def open(cls, checkpoint: Path, seed: int) -> Setup:
        talker, codec_dir = checkpoint / "talker", checkpoint / "codec"
        # Before the reference: the adapter points phonemizer at its own espeak-ng.
        adapter = neutts.NeuTTSAdapter(talker, codec_dir)
        rng = np.random.default_rng(seed)
        module = reference_module()
        ref = reference_instance(module, talker, adapter.codec.model) if module is not None else None
        ref_codes = rng.integers(0, neutts.CODEBOOK_SIZE, 40)
        codes = rng.integers(0, neutts.CODEBOOK_SIZE, (N_FRAMES, 1))
        return cls(adapter, adapter.codec, rng, ref, ref_codes, codes)

    @cached_property
    def tokens(self) -> np.ndarray:
        return self.adapter.codes_to_tokens(self.codes)

    @cached_property
    def token_text(self) -> str:
        """The tokens as the talker would emit them: the text the reference parses."""
        return self.adapter.tokenizer.decode(self.tokens.tolist(), skip_special_tokens=False)

    @cached_property
    def full(self) -> np.ndarray:
        return full_decode(self.codec, self.codes)

    @property
    def peak(self) -> float:
        return float(np.max(np.abs(self.full))) or 1.0

    @property
    def compared(self) -> int:
        """Samples of the non-final chunks: the reference starts its last chunk one frame early, so comparisons
        stop before it."""
        return (N_FRAMES - neutts.LOOKAHEAD_FRAMES) // neutts.CHUNK_FRAMES * neutts.CHUNK_FRAMES * self.codec.hop

    @cached_property
    def reference_stream(self) -> np.ndarray | None:
        return reference_stream(self.ref, self.codes) if self.ref is not None else None


def check_phonemes_and_prompt(s: Setup) -> list[Check]:
    """Phonemes and prompt ids, against the reference's phonemizer and prompt builder."""
    if s.ref is None:
        return [
            Check("phonemes vs neutts", "skipped", "-", MISSING),
            Check("prompt ids vs neutts", "skipped", "-", MISSING),
        ]
    texts = [REF_TEXT, *TEXTS]
    bad = [
        f"{t!r}: ours {s.adapter.phonemize(t)!r} theirs {s.ref._to_phones(t)!r}"
        for t in texts
        if s.adapter.phonemize(t) != s.ref._to_phones(t)
    ]
    checks = [Check("phonemes vs neutts (its bundled espeak-ng)", verdict(not bad),
                    f"{len(texts) - len(bad)}/{len(texts)} phoneme strings identical", "; ".join(bad))]
    bad = []
    for text in TEXTS:
        theirs = s.ref._apply_chat_template(s.ref_codes.tolist(), REF_TEXT, text)
        ours = s.adapter.build_prompt(text, REF_TEXT, s.ref_codes[:, None])
        if ours != theirs:
            bad.append(f"{text!r}: ours {ours[:12]}... theirs {theirs[:12]}...")
    same = len(TEXTS) - len(bad)
    checks.append(
        Check("prompt ids vs neutts", verdict(not bad), f"{same}/{len(TEXTS)} prompts identical", "; ".join(bad))
    )
    return checks


def check_token_codes(s: Setup) -> list[Check]:
    """Token <-> code mapping, against the reference's parser of the generated text."""
    ours = s.adapter.tokens_to_codes(
        np.asarray(s.adapter.keep_tokens([*s.tokens.tolist(), s.adapter.stop_token_ids()[0]]))
    )
    theirs = np.array([int(n) for n in re.findall(r"<\|speech_(\d+)\|>", s.token_text)]).reshape(-1, 1)
    n_same = int((theirs == ours).sum()) if theirs.shape == ours.shape else 0
    ok = n_same == s.codes.size and np.array_equal(ours, s.codes)
    return [Check("token->code mapping vs neutts' parser", verdict(ok), f"{n_same}/{s.codes.size} codes identical")]


def check_reference_encode(s: Setup) -> list[Check]:
    """Reference audio -> codes, against NeuCodecModel.encode on the same features."""
    pcm = (0.1 * s.rng.standard_normal(int(1.5 * s.codec.input_sample_rate))).astype(np.float32)
    mine = s.codec.encode_frames(pcm)
    with torch.no_grad():
        direct = s.codec.model.encode(**s.codec.encoder.features(pcm)).audio_codes[0, 0].numpy()
    same = np.array_equal(mine[:, 0], direct)
    return [Check("reference encode vs NeuCodecModel.encode", verdict(same),
                  f"{len(direct)} codes {'identical' if same else 'differ'} ({len(direct) / 50:.2f} s at 50 frames/s)")]


def check_full_decode(s: Setup) -> list[Check]:
    """Full-sequence decode, against the reference's decode path (token text -> codes -> codec)."""
    with torch.no_grad():
        if s.ref is None:
            theirs = s.codec.model.decode(audio_codes=torch.from_numpy(s.codes.T[None])).audio_values[0, 0].numpy()
            name = "full decode vs NeuCodecModel.decode"
        else:
            theirs = s.ref._decode(s.token_text)
            name = "full decode vs neutts _decode"
    diff = max_abs(s.full, theirs)
    return [Check(name, verdict(diff <= 1e-5), f"max abs diff {diff:.2e} over {len(s.full)} samples")]


def check_stream_vs_full(s: Setup) -> list[Check]:
    """Streaming (25-frame chunks, 51 look-back, 5 look-ahead, 2-frame cross-fade) vs full decode.

    NeuCodec's decoder attends over its whole window, so no window scheme is
    bit-exact against a full decode; the bound is the reference's own
    streaming scheme: ours may differ from the full decode by at most
    STREAM_SLACK x what the reference scheme does on the same codes (its
    figure is printed too)."""
    n, hop, peak, full = s.compared, s.codec.hop, s.peak, s.full
    sizes = [neutts.CHUNK_FRAMES]
    streamed = stream_decode(s.codec, s.codes, sizes)
    diff = max_abs(streamed[:n], full[:n])
    js, jf = boundary_jumps(
        streamed, full, [k * neutts.CHUNK_FRAMES * hop for k in range(1, N_FRAMES // neutts.CHUNK_FRAMES + 1)]
    )
    figure = (f"max abs diff {diff:.4f} ({diff / peak:.1%} of peak) over the first {n // hop} frames;"
              f" boundary step {js:.4f} vs {jf:.4f} in full decode")
    # The engine starts with a 5-frame chunk (family geometry and profile default: lower first-audio latency): reported.
    short = max_abs(stream_decode(s.codec, s.codes, [5, neutts.CHUNK_FRAMES])[:n], full[:n])
    note = f"with a first chunk of 5 frames (the engine's first chunk): {short:.4f} ({short / peak:.1%} of peak)"
    name = f"streaming (chunks {sizes}) vs full decode"
    if s.reference_stream is None:
        return [Check(name, "skipped", figure, MISSING + " (it sets the bound); " + note)]
    ref_vs_full = max_abs(s.reference_stream[:n], full[:n])
    ok = len(streamed) == len(full) and diff <= STREAM_SLACK * ref_vs_full + 1e-6
    return [
        Check(
            name,
            verdict(ok),
            f"{figure}; the neutts scheme: {ref_vs_full:.4f} ({ref_vs_full / peak:.1%}); bound {STREAM_SLACK:g}x that",
            note,
        )
    ]


def check_reference_stream(s: Setup) -> list[Check]:
    """Streaming, against the reference's streaming decoder."""
    name = "streaming vs neutts streaming decoder"
    theirs = s.reference_stream
    if theirs is None:
        return [Check(name, "skipped", "-", MISSING)]
    n, hop = s.compared, s.codec.hop
    ours = stream_decode(s.codec, s.codes, [neutts.CHUNK_FRAMES])
    diff = max_abs(ours[:n], theirs[:n])
    tail = float(np.max(np.abs(ours[n:] - theirs[n : len(ours)]))) if len(theirs) >= len(ours) > n else float("nan")
    return [Check(name, verdict(diff <= 1e-5),
                  f"max abs diff {diff:.2e} over the {n // hop} frames of the non-final chunks (float tolerance 1e-5)",
                  f"final chunk: the reference starts it one frame early ({len(theirs) - len(ours)} samples longer"
                  f" output); we do not, max abs diff there {tail:.4f}")]


def check_batched(s: Setup) -> list[Check]:
    """Batched streaming equals one request at a time."""
    runner = WindowedRunner(s.codec, 3, max_chunk_frames=neutts.CHUNK_FRAMES)
    others = [s.rng.integers(0, neutts.CODEBOOK_SIZE, (n, 1)) for n in (N_FRAMES, 60)]
    batched = stream_batched(runner, [s.codes, *others], neutts.CHUNK_FRAMES, s.codec.lookahead)
    single = [stream_decode(s.codec, x, [neutts.CHUNK_FRAMES]) for x in (s.codes, *others)]
    diff = max(max_abs(a, b) for a, b in zip(batched, single))
    return [
        Check(
            "3 requests batched vs one at a time",
            verdict(diff <= 1e-4),
            f"max abs diff {diff:.2e} (float tolerance 1e-4)",
        )
    ]


CHECKS = [check_phonemes_and_prompt, check_token_codes, check_reference_encode, check_full_decode,
          check_stream_vs_full, check_reference_stream, check_batched]


def run(checkpoint: Path, *, seed: int = 0) -> list[Check]:
    return run_checks(CHECKS, Setup.open(checkpoint, seed))
