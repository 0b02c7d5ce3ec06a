"""Orpheus parity checks: prompt ids, code mapping, SNAC encode/decode, streaming.

The reference is the `orpheus-speech` package (`orpheus_tts`), installed
without its dependencies (it would pull a CUDA vLLM). Its decoder module
downloads SNAC and moves it to CUDA at import; we hand it our SNAC instead
(same weights, noise blocks removed, CPU) before importing it, so its
decoding runs exactly as written on the checkpoint under test.

The pretrained model's continuation prompt has no reference code: it is
checked against the layout of Canopy's training records, rebuilt here from
transformers' tokenizer and `snac.encode` independently of the adapter.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch

from omnicli.engine.models import orpheus
from omnicli.engine.models.snac_codec import SnacCodec, frames_to_snac
from omnicli.engine.windowed import WindowedRunner
from omnicli.parity.checks import (
    STREAM_REL_BOUND,
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
    from snac import SNAC  # untyped package: its model reads as Any
    from transformers import PreTrainedTokenizerBase


class _PinnedSnac:
    """Stands in for `SNAC.from_pretrained(...)` in the reference: `.eval().to(device)` gives our model."""

    def __init__(self, model: SNAC) -> None:
        self.model = model

    def eval(self) -> _PinnedSnac:
        return self

    def to(self, *args: object, **kwargs: object) -> SNAC:
        return self.model


def _reference_modules(snac_model: SNAC) -> tuple[ModuleType, ModuleType] | None:
    """(engine_class, decoder) of orpheus_tts wired to `snac_model` on CPU, or None when not installed."""
    try:
        import snac
    except ImportError:
        return None
    if importlib.util.find_spec("orpheus_tts") is None:
        return None
    original = snac.SNAC.from_pretrained

    def pinned(_cls: object, *_args: object, **_kwargs: object) -> _PinnedSnac:  # whatever repo id: our model
        return _PinnedSnac(snac_model)

    snac.SNAC.from_pretrained = classmethod(pinned)
    try:
        for name in [m for m in sys.modules if m == "orpheus_tts" or m.startswith("orpheus_tts.")]:
            del sys.modules[name]  # its decoder binds the model at import
        decoder = importlib.import_module("orpheus_tts.decoder")
        engine_class = importlib.import_module("orpheus_tts.engine_class")
    finally:
        snac.SNAC.from_pretrained = original
    decoder.snac_device = "cpu"  # type: ignore[attr-defined]  # a global of orpheus_tts' (untyped) decoder
    return engine_class, decoder


@dataclass
class Setup:
    """What the checks share; `rng` is drawn from in check order, so the list's order is part of the result."""

    talker: Path
    codec_dir: Path
    adapter: orpheus.OrpheusAdapter
    codec: SnacCodec
    rng: np.random.Generator
    seed: int
    ref: tuple[ModuleType, ModuleType] | None  # (engine_class, decoder) of orpheus_tts, None when not installed
    codes: np.ndarray  # random codes 1..4095 (the reference's parser drops code 0, a known bug)

    @classmethod
    def open(cls, checkpoint: Path, seed: int) -> Setup:
        talker, codec_dir = checkpoint / "talker", checkpoint / "codec"
        adapter = orpheus.OrpheusAdapter(talker, codec_dir, options={"codec_noise": False})
        rng = np.random.default_rng(seed)
        codes = rng.integers(1, orpheus.CODEBOOK_SIZE, (N_FRAMES, orpheus.FRAME_TOKENS))
        return cls(talker, codec_dir, adapter, adapter.codec, rng, seed, _reference_modules(adapter.codec.snac), codes)

    @cached_property
    def tokens(self) -> np.ndarray:
        return self.adapter.codes_to_tokens(self.codes)

    @cached_property
    def full(self) -> np.ndarray:
        return full_decode(self.codec, self.codes)


N_FRAMES = 24
MISSING = "orpheus-speech not installed"


def check_prompt_ids(s: Setup) -> list[Check]:
    """Prompt ids, against the reference's prompt builder: the default voice, then a row's own voice."""
    if s.ref is None:
        return [Check("prompt ids vs orpheus_tts", "skipped", "-", f"{MISSING} (pip install --no-deps orpheus-speech)"),
                Check("row voice prompt ids vs orpheus_tts", "skipped", "-", MISSING)]
    from transformers import AutoTokenizer

    model = s.ref[0].OrpheusModel.__new__(s.ref[0].OrpheusModel)  # no vLLM engine: only its prompt builder
    model.tokeniser = AutoTokenizer.from_pretrained(str(s.talker), local_files_only=True, trust_remote_code=False)

    def theirs(text: str, voice: str) -> list[int]:
        return model.tokeniser(model._format_prompt(text, voice=voice), add_special_tokens=False).input_ids

    bad = []
    for text in TEXTS:
        ours, ref = s.adapter.build_prompt(text, "", None), theirs(text, s.adapter.voice)
        if ref != ours:
            bad.append(f"{text!r}: ours {ours[:8]}... theirs {ref[:8]}...")
    same = len(TEXTS) - len(bad)
    checks = [
        Check("prompt ids vs orpheus_tts", verdict(not bad), f"{same}/{len(TEXTS)} prompts identical", "; ".join(bad))
    ]
    bad = []
    for i, voice in enumerate(orpheus.VOICES):
        text = TEXTS[i % len(TEXTS)]
        ours, ref = s.adapter.build_prompt(text, "", None, voice=voice), theirs(text, voice)
        if ref != ours:
            bad.append(f"{voice}: ours {ours[:8]}... theirs {ref[:8]}...")
    same = len(orpheus.VOICES) - len(bad)
    checks.append(
        Check(
            "row voice prompt ids vs orpheus_tts",
            verdict(not bad),
            f"{same}/{len(orpheus.VOICES)} voices identical",
            "; ".join(bad),
        )
    )
    return checks


def check_continuation(s: Setup) -> list[Check]:
    """Pretrained continuation: no reference package builds it; compared with the training records' layout."""
    return [_continuation_check(s.talker, s.codec_dir, s.codec, np.random.default_rng(s.seed + 1))]


def check_token_codes(s: Setup) -> list[Check]:
    """Token -> code mapping, against the reference's parser."""
    name = "token->code mapping vs orpheus_tts"
    if s.ref is None:
        return [Check(name, "skipped", "-", MISSING)]
    ours = s.adapter.tokens_to_codes(s.tokens)
    theirs = np.array(
        [s.ref[1].turn_token_into_id(f"<custom_token_{t - 128256}>", i) for i, t in enumerate(s.tokens)]
    ).reshape(ours.shape)
    n_same = int((theirs == ours).sum())
    return [Check(name, verdict(n_same == ours.size), f"{n_same}/{ours.size} codes identical")]


def check_reference_encode(s: Setup) -> list[Check]:
    """Reference audio -> codes, against SNAC's own encode."""
    pcm = (0.1 * s.rng.standard_normal(int(1.5 * s.codec.sample_rate))).astype(np.float32)
    frames = s.codec.encode_frames(pcm)
    with torch.no_grad():
        direct = s.codec.snac.encode(torch.from_numpy(pcm).reshape(1, 1, -1))
    mine = frames_to_snac(torch.from_numpy(frames)[None])
    same = all(torch.equal(a.long(), b.long()) for a, b in zip(mine, direct))
    return [
        Check(
            "reference encode vs snac.encode", verdict(same), f"{frames.size} codes {'identical' if same else 'differ'}"
        )
    ]


def check_full_decode(s: Setup) -> list[Check]:
    """Full-sequence decode, against SNAC decode called the reference's way."""
    with torch.no_grad():
        c = torch.from_numpy(s.codes)
        theirs = s.codec.snac.decode([c[:, 0][None], c[:, [1, 4]].reshape(1, -1), c[:, [2, 3, 5, 6]].reshape(1, -1)])[
            0, 0
        ].numpy()
    diff = max_abs(s.full, theirs)
    return [Check("full decode vs snac.decode", verdict(diff <= 1e-5), f"max abs diff {diff:.2e}")]


def check_window_decoder(s: Setup) -> list[Check]:
    """Streaming, against the reference's sliding-window decoder (4 frames, keeps the 2nd)."""
    name = "streaming vs orpheus_tts window decoder"
    if s.ref is None:
        return [Check(name, "skipped", "-", MISSING)]
    ours = stream_decode(s.codec, s.codes, [1])
    hop = s.codec.hop
    windows = _reference_stream(s.ref[1], s.tokens)
    # The reference emits frame k+1 for each window starting at frame k (k = 0 .. n-4).
    ours_i16 = [(ours[(k + 1) * hop : (k + 2) * hop] * 32767).astype(np.int16) for k in range(len(windows))]
    n_same = sum(np.array_equal(a, b) for a, b in zip(ours_i16, windows))
    worst = max((int(np.max(np.abs(a.astype(int) - b.astype(int)))) for a, b in zip(ours_i16, windows)), default=0)
    ok = n_same == len(windows) and len(windows) == N_FRAMES - 3
    return [Check(name, verdict(ok), f"{n_same}/{len(windows)} frames bit-identical (int16), max diff {worst} LSB")]


def check_stream_vs_full(s: Setup) -> list[Check]:
    """Streaming vs full decode: a bound, and clicks at chunk boundaries."""
    peak = float(np.max(np.abs(s.full))) or 1.0
    checks = []
    for sizes in ([1], [4], [1, 4, 10]):
        streamed = stream_decode(s.codec, s.codes, sizes)
        diff = max_abs(streamed, s.full)
        bounds, at = [], 0
        for i in range(N_FRAMES):
            at += sizes[i] if i < len(sizes) else sizes[-1]
            bounds.append(at * s.codec.hop)
        js, jf = boundary_jumps(streamed, s.full, bounds)
        ok = len(streamed) == len(s.full) and diff <= STREAM_REL_BOUND * peak
        checks.append(
            Check(
                f"streaming (chunks {sizes}) vs full decode",
                verdict(ok),
                f"max abs diff {diff:.4f} ({diff / peak:.1%} of peak; bound {STREAM_REL_BOUND:.0%}); boundary "
                f"step {js:.4f} vs {jf:.4f} in full decode",
            )
        )
    return checks


def check_batched(s: Setup) -> list[Check]:
    """Batched streaming equals one request at a time."""
    runner = WindowedRunner(s.codec, 3, max_chunk_frames=4)
    others = [s.rng.integers(0, orpheus.CODEBOOK_SIZE, (N_FRAMES, orpheus.FRAME_TOKENS)) for _ in range(2)]
    batched = stream_batched(runner, [s.codes, *others], 4, s.codec.lookahead)
    single = [stream_decode(s.codec, x, [4]) for x in (s.codes, *others)]
    diff = max(max_abs(a, b) for a, b in zip(batched, single))
    return [
        Check(
            "3 requests batched vs one at a time",
            verdict(diff <= 1e-5),
            f"max abs diff {diff:.2e} (float tolerance 1e-5)",
        )
    ]


CHECKS = [check_prompt_ids, check_continuation, check_token_codes, check_reference_encode, check_full_decode,
          check_window_decoder, check_stream_vs_full, check_batched]


def run(checkpoint: Path, *, seed: int = 0) -> list[Check]:
    return run_checks(CHECKS, Setup.open(checkpoint, seed))


def training_layout_prompt(
    tokenizer: PreTrainedTokenizerBase, snac_model: SNAC, ref_pcm: np.ndarray, ref_text: str, text: str
) -> list[int]:
    """The pretrained continuation prompt as Canopy's training data lays out its records,
    built independently of the adapter: transformers' tokenizer, `snac.encode` codes
    interleaved one frame at a time, frames repeating the last kept codebook-0 code dropped."""
    o, size = orpheus.CODE_OFFSET, orpheus.CODEBOOK_SIZE
    with torch.no_grad():
        c0, c1, c2 = (c[0].tolist() for c in snac_model.encode(torch.from_numpy(ref_pcm).reshape(1, 1, -1)))
    speech: list[int] = []
    for i in range(len(c0)):
        frame = [c0[i], c1[2 * i], c2[4 * i], c2[4 * i + 1], c1[2 * i + 1], c2[4 * i + 2], c2[4 * i + 3]]
        if not speech or frame[0] + o != speech[-7]:
            speech += [code + o + band * size for band, code in enumerate(frame)]

    def turn(words: str) -> list[int]:
        return [orpheus.START_OF_HUMAN, *tokenizer.encode(words, add_special_tokens=True),
                orpheus.END_OF_TEXT, orpheus.END_OF_HUMAN, orpheus.START_OF_AI, orpheus.START_OF_SPEECH]

    return [*turn(ref_text), *speech, orpheus.END_OF_SPEECH, orpheus.END_OF_AI, *turn(text)]


def _continuation_check(talker: Path, codec_dir: Path, codec: SnacCodec, rng: np.random.Generator) -> Check:
    from transformers import AutoTokenizer

    pretrained = orpheus.OrpheusAdapter(talker, codec_dir, options={"codec_noise": False, "mode": "pretrained"})
    tokenizer = AutoTokenizer.from_pretrained(str(talker), local_files_only=True, trust_remote_code=False)
    # Half a second of silence then loud noise: silent frames repeat their codes (they are
    # dropped) and noisy ones mostly do not, so the de-duplication is exercised both ways.
    rate = codec.sample_rate
    pcm = np.concatenate([np.zeros(rate // 2), 0.8 * rng.standard_normal(rate)]).astype(np.float32)
    frames = pretrained.codec.encode_frames(pcm)  # the engine's reference-encoding path
    same, bad = 0, []
    for text in TEXTS:
        ours = pretrained.build_prompt(text, TEXTS[0], frames)
        theirs = training_layout_prompt(tokenizer, codec.snac, pcm, TEXTS[0], text)
        same += ours == theirs
        if ours != theirs:
            bad.append(f"{text!r}: {len(ours)} vs {len(theirs)} ids")
    kept = len(orpheus.dedup_frames(frames))
    return Check("pretrained continuation prompt vs training-record layout", verdict(same == len(TEXTS)),
                 f"{same}/{len(TEXTS)} prompts identical ({len(frames)} reference frames, {kept} after de-duplication)",
                 "; ".join(bad))


def _reference_stream(decoder: ModuleType, tokens: np.ndarray) -> list[np.ndarray]:
    """Runs the reference's async tokens_decoder on token strings; int16 audio per window."""
    import asyncio

    async def gen() -> AsyncIterator[str]:
        for t in tokens:
            yield f"<custom_token_{int(t) - 128256}>"

    async def collect() -> list[np.ndarray]:
        return [np.frombuffer(b, dtype=np.int16) async for b in decoder.tokens_decoder(gen())]

    with contextlib.redirect_stdout(sys.stderr):
        return asyncio.run(collect())
