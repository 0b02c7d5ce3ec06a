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
import sys
from pathlib import Path

import numpy as np
import torch

from omnicli.engine.models import orpheus
from omnicli.engine.models.snac_codec import SnacCodec, frames_to_snac
from omnicli.engine.models.verify import STREAM_REL_BOUND, TEXTS, Check, boundary_jumps, max_abs
from omnicli.engine.windowed import WindowedRunner, full_decode, stream_decode


class _PinnedSnac:
    """Stands in for `SNAC.from_pretrained(...)` in the reference: `.eval().to(device)` gives our model."""

    def __init__(self, model):
        self.model = model

    def eval(self):
        return self

    def to(self, *args, **kwargs):
        return self.model


def _reference_modules(snac_model):
    """(engine_class, decoder) of orpheus_tts wired to `snac_model` on CPU, or None when not installed."""
    try:
        import snac
    except ImportError:
        return None
    if importlib.util.find_spec("orpheus_tts") is None:
        return None
    original = snac.SNAC.from_pretrained

    def pinned(_cls, *_args, **_kwargs):  # whatever repo id it asks for, it gets our model
        return _PinnedSnac(snac_model)

    snac.SNAC.from_pretrained = classmethod(pinned)
    try:
        for name in [m for m in sys.modules if m == "orpheus_tts" or m.startswith("orpheus_tts.")]:
            del sys.modules[name]  # its decoder binds the model at import
        decoder = importlib.import_module("orpheus_tts.decoder")
        engine_class = importlib.import_module("orpheus_tts.engine_class")
    finally:
        snac.SNAC.from_pretrained = original
    decoder.snac_device = "cpu"
    return engine_class, decoder


def run(checkpoint: Path, *, seed: int = 0) -> list[Check]:
    talker, codec_dir = checkpoint / "talker", checkpoint / "codec"
    adapter = orpheus.OrpheusAdapter(talker, codec_dir, options={"codec_noise": False})
    codec: SnacCodec = adapter.codec
    rng = np.random.default_rng(seed)
    checks: list[Check] = []
    ref = _reference_modules(codec.snac)

    # 1. Prompt ids, against the reference's prompt builder.
    if ref is None:
        checks.append(Check("prompt ids vs orpheus_tts", "skipped", "-", "orpheus-speech not installed (pip install --no-deps orpheus-speech)"))
        checks.append(Check("row voice prompt ids vs orpheus_tts", "skipped", "-", "orpheus-speech not installed"))
    else:
        from transformers import AutoTokenizer

        model = ref[0].OrpheusModel.__new__(ref[0].OrpheusModel)  # no vLLM engine: only its prompt builder
        model.tokeniser = AutoTokenizer.from_pretrained(str(talker))
        same = total = 0
        bad = []
        for text in TEXTS:
            string = model._format_prompt(text, voice=adapter.voice)
            theirs = model.tokeniser(string, add_special_tokens=False).input_ids
            ours = adapter.build_prompt(text, "", None)
            total += 1
            same += theirs == ours
            if theirs != ours:
                bad.append(f"{text!r}: ours {ours[:8]}... theirs {theirs[:8]}...")
        checks.append(Check("prompt ids vs orpheus_tts", "ok" if same == total else "mismatch", f"{same}/{total} prompts identical", "; ".join(bad)))
        # A request's own voice (a manifest row's `voice`) must build the reference's prompt for that voice.
        same, bad = 0, []
        for i, voice in enumerate(orpheus.VOICES):
            text = TEXTS[i % len(TEXTS)]
            theirs = model.tokeniser(model._format_prompt(text, voice=voice), add_special_tokens=False).input_ids
            ours = adapter.build_prompt(text, "", None, voice=voice)
            same += theirs == ours
            if theirs != ours:
                bad.append(f"{voice}: ours {ours[:8]}... theirs {theirs[:8]}...")
        checks.append(Check("row voice prompt ids vs orpheus_tts", "ok" if same == len(orpheus.VOICES) else "mismatch",
                            f"{same}/{len(orpheus.VOICES)} voices identical", "; ".join(bad)))

    # 1b. Pretrained continuation: no reference package builds it; compare with the training records' layout.
    checks.append(_continuation_check(talker, codec_dir, codec, np.random.default_rng(seed + 1)))

    # 2. Token -> code mapping, against the reference's parser (codes 1..4095: it drops code 0, a known bug).
    n_frames = 24
    codes = rng.integers(1, orpheus.CODEBOOK_SIZE, (n_frames, orpheus.FRAME_TOKENS))
    tokens = adapter.codes_to_tokens(codes)
    ours = adapter.tokens_to_codes(tokens)
    if ref is None:
        checks.append(Check("token->code mapping vs orpheus_tts", "skipped", "-", "orpheus-speech not installed"))
    else:
        theirs = np.array([ref[1].turn_token_into_id(f"<custom_token_{t - 128256}>", i) for i, t in enumerate(tokens)]).reshape(ours.shape)
        n_same = int((theirs == ours).sum())
        checks.append(Check("token->code mapping vs orpheus_tts", "ok" if n_same == ours.size else "mismatch", f"{n_same}/{ours.size} codes identical"))

    # 3. Reference audio -> codes, against SNAC's own encode.
    pcm = (0.1 * rng.standard_normal(int(1.5 * codec.sample_rate))).astype(np.float32)
    frames = codec.encode_frames(pcm)
    with torch.no_grad():
        direct = codec.snac.encode(torch.from_numpy(pcm).reshape(1, 1, -1))
    mine = frames_to_snac(torch.from_numpy(frames)[None])
    same = all(torch.equal(a.long(), b.long()) for a, b in zip(mine, direct))
    checks.append(Check("reference encode vs snac.encode", "ok" if same else "mismatch", f"{frames.size} codes {'identical' if same else 'differ'}"))

    # 4. Full-sequence decode, against SNAC decode called the reference's way.
    full = full_decode(codec, codes)
    with torch.no_grad():
        c = torch.from_numpy(codes)
        theirs = codec.snac.decode([c[:, 0][None], c[:, [1, 4]].reshape(1, -1), c[:, [2, 3, 5, 6]].reshape(1, -1)])[0, 0].numpy()
    diff = max_abs(full, theirs)
    checks.append(Check("full decode vs snac.decode", "ok" if diff <= 1e-5 else "mismatch", f"max abs diff {diff:.2e}"))

    # 5. Streaming, against the reference's sliding-window decoder (4 frames, keeps the 2nd).
    ours_stream = stream_decode(codec, codes, [1])
    hop = codec.hop
    if ref is None:
        checks.append(Check("streaming vs orpheus_tts window decoder", "skipped", "-", "orpheus-speech not installed"))
    else:
        windows = _reference_stream(ref[1], tokens)
        # The reference emits frame k+1 for each window starting at frame k (k = 0 .. n-4).
        ours_i16 = [(ours_stream[(k + 1) * hop : (k + 2) * hop] * 32767).astype(np.int16) for k in range(len(windows))]
        n_same = sum(np.array_equal(a, b) for a, b in zip(ours_i16, windows))
        worst = max((int(np.max(np.abs(a.astype(int) - b.astype(int)))) for a, b in zip(ours_i16, windows)), default=0)
        status = "ok" if n_same == len(windows) and len(windows) == n_frames - 3 else "mismatch"
        checks.append(Check("streaming vs orpheus_tts window decoder", status, f"{n_same}/{len(windows)} frames bit-identical (int16), max diff {worst} LSB"))

    # 6. Streaming vs full decode: a bound, and clicks at chunk boundaries.
    peak = float(np.max(np.abs(full))) or 1.0
    for sizes in ([1], [4], [1, 4, 10]):
        s = stream_decode(codec, codes, sizes)
        diff = max_abs(s, full)
        bounds, at = [], 0
        for i in range(n_frames):
            at += sizes[i] if i < len(sizes) else sizes[-1]
            bounds.append(at * hop)
        js, jf = boundary_jumps(s, full, bounds)
        ok = len(s) == len(full) and diff <= STREAM_REL_BOUND * peak
        checks.append(Check(
            f"streaming (chunks {sizes}) vs full decode", "ok" if ok else "mismatch",
            f"max abs diff {diff:.4f} ({diff / peak:.1%} of peak; bound {STREAM_REL_BOUND:.0%}); boundary step {js:.4f} vs {jf:.4f} in full decode",
        ))

    # 7. Batched streaming equals one request at a time.
    runner = WindowedRunner(codec, 3, max_chunk_frames=4)
    others = [rng.integers(0, orpheus.CODEBOOK_SIZE, (n_frames, orpheus.FRAME_TOKENS)) for _ in range(2)]
    batched = _stream_batched(runner, [codes, *others], 4, codec.lookahead)
    single = [stream_decode(codec, x, [4]) for x in (codes, *others)]
    diff = max(max_abs(a, b) for a, b in zip(batched, single))
    checks.append(Check("3 requests batched vs one at a time", "ok" if diff <= 1e-5 else "mismatch", f"max abs diff {diff:.2e} (float tolerance 1e-5)"))
    return checks


def training_layout_prompt(tokenizer, snac_model, ref_pcm: np.ndarray, ref_text: str, text: str) -> list[int]:
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


def _continuation_check(talker: Path, codec_dir: Path, codec: SnacCodec, rng) -> Check:
    from transformers import AutoTokenizer

    pretrained = orpheus.OrpheusAdapter(talker, codec_dir, options={"codec_noise": False, "mode": "pretrained"})
    tokenizer = AutoTokenizer.from_pretrained(str(talker))
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
    return Check("pretrained continuation prompt vs training-record layout", "ok" if same == len(TEXTS) else "mismatch",
                 f"{same}/{len(TEXTS)} prompts identical ({len(frames)} reference frames, {kept} after de-duplication)",
                 "; ".join(bad))


def _reference_stream(decoder, tokens: np.ndarray) -> list[np.ndarray]:
    """Runs the reference's async tokens_decoder on token strings; int16 audio per window."""
    import asyncio

    async def gen():
        for t in tokens:
            yield f"<custom_token_{int(t) - 128256}>"

    async def collect():
        return [np.frombuffer(b, dtype=np.int16) async for b in decoder.tokens_decoder(gen())]

    with contextlib.redirect_stdout(sys.stderr):
        return asyncio.run(collect())


def _stream_batched(runner: WindowedRunner, seqs: list[np.ndarray], size: int, lookahead: int) -> list[np.ndarray]:
    """Every request advances one chunk per step, all in the same step (one batched decode)."""
    from omnicli.engine.windowed import WindowChunker

    chunkers = [WindowChunker(seqs[0].shape[1], size, size, lookahead=lookahead) for _ in seqs]
    pending = [ch.feed(s) for ch, s in zip(chunkers, seqs)]
    for ch, p in zip(chunkers, pending):
        rest = ch.flush()
        if len(rest):
            p.append(rest)
    out = [[] for _ in seqs]
    for step in range(max(len(p) for p in pending)):
        rows = [i for i, p in enumerate(pending) if step < len(p)]
        pcm = runner.execute(rows, [pending[i][step] for i in rows], last=[step == len(pending[i]) - 1 for i in rows])
        for i, a in zip(rows, pcm):
            out[i].append(a)
    return [np.concatenate(o) for o in out]
