"""Stage 1 for codecs decoded in stateless windows (SNAC, NeuCodec).

These decoders are not causal streaming transformers with caches: each
call decodes a whole window of frames. A request's chunk of new frames
[a, b) is decoded inside the window [a - lookback, b + lookahead), and only
the audio of [a, b) is kept, so every frame is decoded with context on both
sides. The look-ahead frames travel with the chunk (`WindowChunker` holds a
chunk back until they exist; the last chunk has none), the look-back frames
come from the slot's history. Where the family asks for it, the first
`overlap` frames of a chunk are cross-faded (linearly) with the audio the
previous window decoded for them, which hides any step at the boundary.

Rows of one step whose windows have the same length are decoded in one
batched call; windows of different lengths go in separate calls (no
padding, so batching never changes a row's audio).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from omnicli.engine.chunker import Chunker


class WindowChunker(Chunker):
    """A Chunker whose chunks carry `lookahead` extra frames (also the start of the next chunk)."""

    def __init__(
        self, num_codebooks: int, initial_frames: int, chunk_frames: int, ramp: Sequence[int] | None = None, *,
        lookahead: int = 0,
    ):
        super().__init__(num_codebooks, initial_frames, chunk_frames, ramp)
        if lookahead < 0:
            raise ValueError(f"lookahead must be >= 0, got {lookahead}")
        self.lookahead = lookahead

    @property
    def max_chunk_frames(self) -> int:
        return super().max_chunk_frames + self.lookahead

    def feed(self, frames: np.ndarray) -> list[np.ndarray]:
        self._buf = np.concatenate([self._buf, np.asarray(frames, dtype=np.int64)])
        out = []
        while len(self._buf) >= (size := self.next_size()) + self.lookahead:
            out.append(self._buf[: size + self.lookahead])
            self._buf = self._buf[size:]
            self.chunks_emitted += 1
        return out


class WindowCodec(nn.Module):
    """What a windowed codec offers the runner and the engine (see omnicli.engine.models.snac_codec)."""

    hop: int  # output samples per frame
    num_codebooks: int  # code columns per frame
    lookback: int
    lookahead: int
    overlap: int
    sample_rate: int  # of the decoded audio
    encoder: nn.Module  # reference PCM (1-D tensor) -> codes (n, num_codebooks): what the reference cache calls

    def decode_frames(self, codes: torch.Tensor) -> torch.Tensor:  # (B, n, K) -> (B, n * hop)
        raise NotImplementedError

    def encode_frames(self, pcm: np.ndarray) -> np.ndarray:  # reference PCM -> codes (n, K)
        raise NotImplementedError


class WindowedRunner:
    """Decodes chunks of many requests per step; same interface as CodecRunner."""

    def __init__(self, codec: WindowCodec, num_slots: int, *, max_chunk_frames: int, device: str = "cpu"):
        if num_slots < 1 or max_chunk_frames < 1:
            raise ValueError(
                f"need at least one slot and max_chunk_frames >= 1, got {num_slots} and {max_chunk_frames}"
            )
        if codec.overlap > codec.lookahead:
            raise ValueError(
                f"overlap ({codec.overlap}) cannot exceed lookahead ({codec.lookahead}): it cross-fades "
                "look-ahead audio"
            )
        self.codec = codec
        self.num_slots = num_slots
        self.max_chunk_frames = max_chunk_frames + codec.lookahead
        self.device = torch.device(device)
        self.hop = codec.hop
        self._history: list[np.ndarray] = [np.zeros((0, codec.num_codebooks), np.int64) for _ in range(num_slots)]
        self._tail: list[np.ndarray | None] = [None] * num_slots  # previous window's audio of this chunk's first frames
        self._pos = [0] * num_slots
        fade = codec.overlap * codec.hop
        self._fade_in = (np.arange(1, fade + 1, dtype=np.float32) / (fade + 1)) if fade else None

    @property
    def positions(self) -> list[int]:
        return list(self._pos)

    def reset_slot(self, slot: int) -> None:
        self._history[slot] = self._history[slot][:0]
        self._tail[slot] = None
        self._pos[slot] = 0

    def padded_batch_size(self, rows: int) -> int:
        return rows

    @torch.no_grad()
    def execute(
        self,
        slots: Sequence[int],
        chunks: Sequence[np.ndarray],
        pad_to_frames: int = 0,
        last: Sequence[bool] | None = None,
    ) -> list[np.ndarray]:
        """One chunk (frames incl. look-ahead unless last, K) per slot -> PCM of its new frames.

        A step that raises changes no slot: every row's output and new slot
        state is computed first and committed only when all rows succeeded,
        so the codec stage can re-run a failed step's rows one at a time.
        """
        last = list(last) if last is not None else [False] * len(chunks)
        self._check_step(slots, chunks, last)
        c = self.codec
        windows, starts, news = [], [], []
        for slot, chunk, is_last in zip(slots, chunks, last):
            hist = self._history[slot][-c.lookback:] if c.lookback else self._history[slot][:0]
            new = len(chunk) if is_last else len(chunk) - c.lookahead
            windows.append(np.concatenate([hist, np.asarray(chunk, np.int64)]))
            starts.append(len(hist))
            news.append(new)
        pcm = self._decode_grouped(windows)
        out, updates = [], []
        fade = c.overlap * self.hop
        for i, (slot, chunk, is_last) in enumerate(zip(slots, chunks, last)):
            a, n = starts[i] * self.hop, news[i] * self.hop
            audio = pcm[i][a : a + n].astype(np.float32, copy=True)
            tail = self._tail[slot]
            if tail is not None and len(tail) and len(audio) and self._fade_in is not None:  # a tail implies a fade
                m = min(len(tail), len(audio))
                w = self._fade_in[:m]
                audio[:m] = tail[:m] * (1 - w) + audio[:m] * w
            next_tail = None if is_last or not fade else pcm[i][a + n : a + n + fade].astype(np.float32, copy=True)
            history = np.concatenate([self._history[slot], np.asarray(chunk[: news[i]], np.int64)])[
                -max(c.lookback, 1) :
            ]
            updates.append((slot, next_tail, history, news[i]))
            out.append(audio)
        for slot, next_tail, history, new in updates:  # nothing above raised: commit
            self._tail[slot] = next_tail
            self._history[slot] = history
            self._pos[slot] += new
        return out

    def _decode_grouped(self, windows: list[np.ndarray]) -> list[np.ndarray]:
        out: dict[int, np.ndarray] = {}
        by_len: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            by_len.setdefault(len(w), []).append(i)
        for rows in by_len.values():
            codes = torch.from_numpy(np.stack([windows[i] for i in rows])).to(self.device)
            pcm = self.codec.decode_frames(codes).float().cpu().numpy()
            for j, i in enumerate(rows):
                out[i] = pcm[j]
        return [out[i] for i in range(len(windows))]

    def _check_step(self, slots: Sequence[int], chunks: Sequence[np.ndarray], last: list[bool]) -> None:
        if not chunks or len(slots) != len(chunks) or len(last) != len(chunks):
            raise ValueError(
                f"a step needs one slot per chunk and at least one chunk, got {len(slots)} slots, {len(chunks)} chunks"
            )
        if len(set(slots)) != len(slots) or not all(0 <= s < self.num_slots for s in slots):
            raise ValueError(f"slots of a step must be distinct and in 0..{self.num_slots - 1}, got {list(slots)}")
        for chunk, is_last in zip(chunks, last):
            need = 1 if is_last else self.codec.lookahead + 1
            if not need <= len(chunk) <= self.max_chunk_frames:
                raise ValueError(
                    f"chunks must have {need}..{self.max_chunk_frames} frames (look-ahead included), got {len(chunk)}"
                )
