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
import sys
import types
from pathlib import Path

import numpy as np
import torch

from omnicli.engine.models import neutts
from omnicli.engine.models.verify import TEXTS, Check, boundary_jumps, max_abs
from omnicli.engine.windowed import WindowedRunner, full_decode, stream_decode

REF_TEXT = "The birch canoe slid on the smooth planks."
# Our streaming may differ from the full decode by at most this multiple of the reference scheme's difference.
STREAM_SLACK = 1.25


class _CodecShim:
    """What the reference calls on its codec (`decode_code`, `.device`), backed by transformers' NeuCodecModel."""

    def __init__(self, model):
        self.model = model
        self.device = torch.device("cpu")

    def decode_code(self, codes: torch.Tensor) -> torch.Tensor:
        return self.model.decode(audio_codes=codes).audio_values


class _TokenStream:
    """Stands in for the llama.cpp backbone of `_infer_stream_ggml`: streams fixed speech tokens."""

    def __init__(self, codes):
        self.codes = [int(c) for c in codes]

    def reset(self):
        pass

    def __call__(self, prompt, **kwargs):
        return iter([{"choices": [{"text": neutts.speech_token(c)}]} for c in self.codes])


def reference_module():
    """The reference `neutts.neutts` module, or None when the `neutts` package is not installed."""
    if importlib.util.find_spec("neutts") is None:
        return None
    if "neucodec" not in sys.modules and importlib.util.find_spec("neucodec") is None:
        stub = types.ModuleType("neucodec")
        stub.NeuCodec = stub.DistillNeuCodec = None  # never called by the checks
        sys.modules["neucodec"] = stub
    if "librosa" not in sys.modules and importlib.util.find_spec("librosa") is None:
        sys.modules["librosa"] = types.ModuleType("librosa")  # only encode_reference (unused here) needs it
    return importlib.import_module("neutts.neutts")


def reference_instance(module, talker: Path, codec_model, language: str = neutts.LANGUAGE):
    """A NeuTTS object with the reference's own phonemizer, the checkpoint's tokenizer and our codec model."""
    from transformers import AutoTokenizer

    ref = module.NeuTTS.__new__(module.NeuTTS)
    ref.sample_rate, ref.max_context, ref.hop_length = 24000, 2048, 480
    ref.streaming_overlap_frames, ref.streaming_frames_per_chunk = 1, 25
    ref.streaming_lookforward, ref.streaming_lookback = 5, 50
    ref.streaming_stride_samples = ref.streaming_frames_per_chunk * ref.hop_length
    ref._is_quantized_model, ref._is_onnx_codec, ref._seed, ref.watermarker = False, False, 0, None
    ref.input_format = "phonemes"
    ref.tokenizer = AutoTokenizer.from_pretrained(str(talker))
    with contextlib.redirect_stdout(sys.stderr):
        ref._load_phonemizer(language, None)
    ref.codec = _CodecShim(codec_model)
    return ref


def reference_stream(ref, codes: np.ndarray) -> np.ndarray:
    """The reference's streaming decode of `codes` (no reference codes before them)."""
    ref.backbone = _TokenStream(codes.reshape(-1))
    with contextlib.redirect_stdout(sys.stderr), torch.no_grad():
        parts = list(ref._infer_stream_ggml([], "a", "a"))  # the texts only shape the (unused) prompt
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def run(checkpoint: Path, *, seed: int = 0) -> list[Check]:
    talker, codec_dir = checkpoint / "talker", checkpoint / "codec"
    adapter = neutts.NeuTTSAdapter(talker, codec_dir)  # before the reference: it points phonemizer at its own espeak-ng
    codec = adapter.codec
    rng = np.random.default_rng(seed)
    checks: list[Check] = []
    module = reference_module()
    ref = reference_instance(module, talker, codec.model) if module is not None else None
    missing = "neutts not installed (pip install --no-deps neutts==1.4.1)"
    ref_codes = rng.integers(0, neutts.CODEBOOK_SIZE, 40)

    # 1. Phonemes and prompt ids, against the reference's phonemizer and prompt builder.
    if ref is None:
        checks.append(Check("phonemes vs neutts", "skipped", "-", missing))
        checks.append(Check("prompt ids vs neutts", "skipped", "-", missing))
    else:
        texts = [REF_TEXT, *TEXTS]
        bad = [f"{t!r}: ours {adapter.phonemize(t)!r} theirs {ref._to_phones(t)!r}" for t in texts if adapter.phonemize(t) != ref._to_phones(t)]
        checks.append(Check("phonemes vs neutts (its bundled espeak-ng)", "mismatch" if bad else "ok",
                            f"{len(texts) - len(bad)}/{len(texts)} phoneme strings identical", "; ".join(bad)))
        same, bad = 0, []
        for text in TEXTS:
            theirs = ref._apply_chat_template(ref_codes.tolist(), REF_TEXT, text)
            ours = adapter.build_prompt(text, REF_TEXT, ref_codes[:, None])
            same += ours == theirs
            if ours != theirs:
                bad.append(f"{text!r}: ours {ours[:12]}... theirs {theirs[:12]}...")
        checks.append(Check("prompt ids vs neutts", "ok" if same == len(TEXTS) else "mismatch", f"{same}/{len(TEXTS)} prompts identical", "; ".join(bad)))

    # 2. Token <-> code mapping, against the reference's parser of the generated text.
    n_frames = 90
    codes = rng.integers(0, neutts.CODEBOOK_SIZE, (n_frames, 1))
    tokens = adapter.codes_to_tokens(codes)
    ours = adapter.tokens_to_codes(np.asarray(adapter.keep_tokens([*tokens.tolist(), adapter.stop_token_ids()[0]])))
    import re

    text = adapter.tokenizer.decode(tokens.tolist(), skip_special_tokens=False)
    theirs = np.array([int(n) for n in re.findall(r"<\|speech_(\d+)\|>", text)]).reshape(-1, 1)
    n_same = int((theirs == ours).sum()) if theirs.shape == ours.shape else 0
    checks.append(Check("token->code mapping vs neutts' parser", "ok" if n_same == codes.size and np.array_equal(ours, codes) else "mismatch",
                        f"{n_same}/{codes.size} codes identical"))

    # 3. Reference audio -> codes, against NeuCodecModel.encode on the same features.
    pcm = (0.1 * rng.standard_normal(int(1.5 * codec.input_sample_rate))).astype(np.float32)
    mine = codec.encode_frames(pcm)
    with torch.no_grad():
        direct = codec.model.encode(**codec.encoder.features(pcm)).audio_codes[0, 0].numpy()
    same = np.array_equal(mine[:, 0], direct)
    checks.append(Check("reference encode vs NeuCodecModel.encode", "ok" if same else "mismatch",
                        f"{len(direct)} codes {'identical' if same else 'differ'} ({len(direct) / 50:.2f} s at 50 frames/s)"))

    # 4. Full-sequence decode, against the reference's decode path (token text -> codes -> codec).
    full = full_decode(codec, codes)
    if ref is None:
        with torch.no_grad():
            theirs = codec.model.decode(audio_codes=torch.from_numpy(codes.T[None])).audio_values[0, 0].numpy()
        name = "full decode vs NeuCodecModel.decode"
    else:
        with torch.no_grad():
            theirs = ref._decode(text)
        name = "full decode vs neutts _decode"
    diff = max_abs(full, theirs)
    checks.append(Check(name, "ok" if diff <= 1e-5 else "mismatch", f"max abs diff {diff:.2e} over {len(full)} samples"))

    # 5. Streaming (25-frame chunks, 51 look-back, 5 look-ahead, 2-frame cross-fade). NeuCodec's decoder
    # attends over its whole window, so no window scheme is bit-exact against a full decode; the bound is
    # the reference's own streaming scheme: ours may differ from the full decode by at most
    # STREAM_SLACK x what the reference scheme does on the same codes (its figure is printed too).
    peak = float(np.max(np.abs(full))) or 1.0
    hop = codec.hop
    # The reference's last chunk starts one frame early (its output is one frame longer): compare before it.
    n = (n_frames - neutts.LOOKAHEAD_FRAMES) // neutts.CHUNK_FRAMES * neutts.CHUNK_FRAMES * hop  # audio of the non-final chunks
    theirs = reference_stream(ref, codes) if ref is not None else None
    ref_vs_full = max_abs(theirs[:n], full[:n]) if theirs is not None else None
    sizes = [neutts.CHUNK_FRAMES]
    s = stream_decode(codec, codes, sizes)
    diff = max_abs(s[:n], full[:n])
    js, jf = boundary_jumps(s, full, [k * neutts.CHUNK_FRAMES * hop for k in range(1, n_frames // neutts.CHUNK_FRAMES + 1)])
    figure = (f"max abs diff {diff:.4f} ({diff / peak:.1%} of peak) over the first {n // hop} frames;"
              f" boundary step {js:.4f} vs {jf:.4f} in full decode")
    # The engine's default profile starts with a 5-frame chunk (lower first-audio latency, less context): reported.
    short = max_abs(stream_decode(codec, codes, [5, neutts.CHUNK_FRAMES])[:n], full[:n])
    note = f"with a first chunk of 5 frames (the default profile): {short:.4f} ({short / peak:.1%} of peak)"
    if ref_vs_full is None:
        checks.append(Check(f"streaming (chunks {sizes}) vs full decode", "skipped", figure, missing + " (it sets the bound); " + note))
    else:
        ok = len(s) == len(full) and diff <= STREAM_SLACK * ref_vs_full + 1e-6
        checks.append(Check(f"streaming (chunks {sizes}) vs full decode", "ok" if ok else "mismatch",
                            f"{figure}; the neutts scheme: {ref_vs_full:.4f} ({ref_vs_full / peak:.1%}); bound {STREAM_SLACK:g}x that", note))
    if theirs is None:
        checks.append(Check("streaming vs neutts streaming decoder", "skipped", "-", missing))
    else:
        ours_s = stream_decode(codec, codes, [neutts.CHUNK_FRAMES])
        diff = max_abs(ours_s[:n], theirs[:n])
        tail = float(np.max(np.abs(ours_s[n:] - theirs[n : len(ours_s)]))) if len(theirs) >= len(ours_s) > n else float("nan")
        checks.append(Check("streaming vs neutts streaming decoder", "ok" if diff <= 1e-5 else "mismatch",
                            f"max abs diff {diff:.2e} over the {n // hop} frames of the non-final chunks (float tolerance 1e-5)",
                            f"final chunk: the reference starts it one frame early ({len(theirs) - len(ours_s)} samples longer"
                            f" output); we do not, max abs diff there {tail:.4f}"))

    # 6. Batched streaming equals one request at a time.
    runner = WindowedRunner(codec, 3, max_chunk_frames=neutts.CHUNK_FRAMES)
    others = [rng.integers(0, neutts.CODEBOOK_SIZE, (n, 1)) for n in (n_frames, 60)]
    from omnicli.engine.models.verify_orpheus import _stream_batched

    batched = _stream_batched(runner, [codes, *others], neutts.CHUNK_FRAMES, codec.lookahead)
    single = [stream_decode(codec, x, [neutts.CHUNK_FRAMES]) for x in (codes, *others)]
    diff = max(max_abs(a, b) for a, b in zip(batched, single))
    checks.append(Check("3 requests batched vs one at a time", "ok" if diff <= 1e-4 else "mismatch", f"max abs diff {diff:.2e} (float tolerance 1e-4)"))
    return checks

