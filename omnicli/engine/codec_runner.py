"""Stage 1 model runner: executes one batch of chunks on the codec decoder.

Each request owns a slot; a slot holds, per decoder layer, a ring of keys
and values and the absolute position of each entry. A step takes ragged
chunks from several slots, pads them into one batch, writes each chunk's
keys/values into its slot's rings (the whole chunk, before attention),
attends, and returns PCM per row. Padding (ragged tails, tail padding, rows
added to reach a capture size) never writes to any ring and never advances
any slot.

Backends (`codec_attention_backend`):

- `sdpa`: gathers each query's window (its `context` keys, ordered by
  absolute position, missing ones zero-filled and masked) into contiguous
  K/V and calls PyTorch SDPA through `window_attention`, the function the
  whole-sequence reference uses too: with ring headroom, streaming equals
  `decode_full` bit for bit in float64.
- `slot`: attends on the slot rings in place: one SDPA call per run of
  consecutive slot ids over a view of the ring tensors (no K/V copy), with
  a mask built from the ring's positions. Same audio within dtype tolerance
  (the keys are summed in ring order, not position order).
- `triton`: CUDA only; the kernel is not part of this build.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from omnicli.engine.models.codec import CodecDecoder, window_attention

BACKENDS = ("sdpa", "slot", "triton")
SLOT_RUN_GAP = 4  # `slot`: idle slots between two runs that are cheaper to compute over than another call


class CodecRunner:
    def __init__(
        self,
        decoder: CodecDecoder,
        num_slots: int,
        *,
        max_chunk_frames: int,
        ring_headroom: bool = False,
        contexts: Sequence[int] | None = None,
        backend: str = "sdpa",
        capture_sizes: Sequence[int] | None = None,
        device: str = "cpu",
    ):
        self.device = torch.device(device)
        _check_backend(backend, self.device)
        cfg = decoder.cfg
        self.contexts = list(contexts or cfg.contexts)
        if len(self.contexts) != cfg.num_layers or any(c < 1 for c in self.contexts):
            raise ValueError(
                f"codec.layer_contexts needs {cfg.num_layers} entries >= 1 (one per codec layer), got {self.contexts}"
            )
        if num_slots < 1 or max_chunk_frames < 1:
            raise ValueError(
                f"need at least one slot and max_chunk_frames >= 1, got {num_slots} and {max_chunk_frames}"
            )
        self.decoder = decoder
        self.backend = backend
        self.num_slots = num_slots
        self.max_chunk_frames = max_chunk_frames
        self.ring_headroom = ring_headroom
        # Headroom: a chunk's own writes never evict a key still in one of its queries' windows.
        self.ring_sizes = [c + max_chunk_frames if ring_headroom else c for c in self.contexts]
        self.capture_sizes = list(capture_sizes) if capture_sizes else None
        self.hop = cfg.hop
        self.num_codebooks = cfg.num_codebooks
        heads, head_dim = cfg.num_heads, cfg.dim // cfg.num_heads
        dtype = next(decoder.parameters()).dtype
        self.k = [torch.zeros(num_slots, heads, r, head_dim, dtype=dtype, device=self.device) for r in self.ring_sizes]
        self.v = [torch.zeros_like(k) for k in self.k]
        self.kpos = [torch.full((num_slots, r), -1, dtype=torch.long, device=self.device) for r in self.ring_sizes]
        self._pos = [0] * num_slots  # frames decoded so far per slot (host side: no device sync to read)

    @property
    def positions(self) -> list[int]:
        return list(self._pos)

    def reset_slot(self, slot: int) -> None:
        """Forgets a finished request's state so the slot starts clean."""
        for k, v, kp in zip(self.k, self.v, self.kpos):
            k[slot].zero_()
            v[slot].zero_()
            kp[slot] = -1
        self._pos[slot] = 0

    def padded_batch_size(self, rows: int) -> int:
        """The capture size a batch of `rows` is padded up to (rows itself above the largest)."""
        if not self.capture_sizes or rows > self.capture_sizes[-1]:
            return rows
        return self.capture_sizes[bisect.bisect_left(self.capture_sizes, rows)]

    @torch.no_grad()
    def execute(
        self,
        slots: Sequence[int],
        chunks: Sequence[np.ndarray],
        pad_to_frames: int = 0,
        last: Sequence[bool] | None = None,
    ) -> list[np.ndarray]:
        """Decodes one chunk (frames, K) per slot; returns PCM per chunk (float32; float64 for a float64 decoder).

        `pad_to_frames` pads the step's frame dimension (a padded tail); the
        padding is computed and discarded, like capture-size padding rows.
        `last` (which chunks end their request) matters to windowed runners only.
        """
        lengths = [len(c) for c in chunks]
        self._check_step(slots, lengths)
        n_real = len(chunks)
        batch = self.padded_batch_size(n_real)
        frames = max(max(lengths), pad_to_frames)
        codes = np.zeros((batch, frames, self.num_codebooks), dtype=np.int64)
        for i, c in enumerate(chunks):
            codes[i, : lengths[i]] = c
        dev = self.device
        slot_t = torch.tensor(list(slots), device=dev)
        length_t = torch.tensor(lengths, device=dev)
        offsets = torch.arange(frames, device=dev)
        q_pos = torch.tensor([self._pos[s] for s in slots], device=dev)[:, None] + offsets  # (rows, frames) absolute

        x = self.decoder.embed_codes(torch.from_numpy(codes).to(dev))
        for li, layer in enumerate(self.decoder.blocks):
            q, k, v = layer.split_qkv(x)
            self._write(li, slot_t, length_t, offsets, q_pos, k, v)
            if self.backend == "sdpa":
                attn = self._attend_sdpa(li, q, slot_t, q_pos)
            else:
                attn = self._attend_slot(li, q, list(slots), q_pos)
            x = layer.finish(x, attn)
        out = self.decoder.to_pcm(x)
        if out.dtype != torch.float64:  # float64 stays exact for reference checks; the rest become float32
            out = out.float()
        pcm = out.cpu().numpy()
        for s, n in zip(slots, lengths):
            self._pos[s] += n
        return [pcm[i, : n * self.hop].copy() for i, n in enumerate(lengths)]

    def _check_step(self, slots: Sequence[int], lengths: list[int]) -> None:
        if not lengths or len(slots) != len(lengths):
            raise ValueError(
                f"a step needs one slot per chunk and at least one chunk, got {len(slots)} slots, {len(lengths)} chunks"
            )
        if len(set(slots)) != len(slots) or not all(0 <= s < self.num_slots for s in slots):
            raise ValueError(f"slots of a step must be distinct and in 0..{self.num_slots - 1}, got {list(slots)}")
        bad = [n for n in lengths if not 1 <= n <= self.max_chunk_frames]
        if bad:
            raise ValueError(
                f"chunks must have 1..{self.max_chunk_frames} frames (the rings are sized for that), got {bad}"
            )

    def _write(
        self, li: int, slot_t: torch.Tensor, length_t: torch.Tensor, offsets: torch.Tensor, q_pos: torch.Tensor,
        k: torch.Tensor, v: torch.Tensor,
    ) -> None:
        """Writes every real frame's key/value into its slot's ring (only the last `ring` of a longer chunk)."""
        ring = self.ring_sizes[li]
        n_real = len(slot_t)
        keep = (offsets[None] < length_t[:, None]) & (offsets[None] >= length_t[:, None] - ring)
        row, col = keep.nonzero(as_tuple=True)
        pos = q_pos[row, col]
        slot, idx = slot_t[row], pos % ring
        self.k[li][slot, :, idx] = k[:n_real][row, :, col]
        self.v[li][slot, :, idx] = v[:n_real][row, :, col]
        self.kpos[li][slot, idx] = pos

    def _attend_sdpa(self, li: int, q: torch.Tensor, slot_t: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
        """Gathers one position-ordered buffer per row from its slot's ring, then `window_attention`."""
        ctx, ring = self.contexts[li], self.ring_sizes[li]
        n_real, frames = q_pos.shape
        # Covers every window of the row: query n's is buffer rows n .. n + ctx - 1.
        buf_pos = q_pos[:, :1] - (ctx - 1) + torch.arange(frames + ctx - 1, device=self.device)
        idx = buf_pos % ring
        slot_col = slot_t[:, None]
        valid = (self.kpos[li][slot_col, idx] == buf_pos) & (buf_pos >= 0)  # (rows, L)
        hidden = ~valid[:, :, None, None]
        k_buf = self.k[li][slot_col, :, idx].masked_fill_(hidden, 0)  # (rows, L, heads, head_dim); missing keys are 0
        v_buf = self.v[li][slot_col, :, idx].masked_fill_(hidden, 0)
        batch = q.shape[0]
        if batch > n_real:  # capture padding rows: nothing to attend to
            pad = batch - n_real
            k_buf = torch.cat([k_buf, k_buf.new_zeros(pad, *k_buf.shape[1:])])
            v_buf = torch.cat([v_buf, v_buf.new_zeros(pad, *v_buf.shape[1:])])
            valid = torch.cat([valid, valid.new_zeros(pad, valid.shape[1])])
        out = window_attention(q.transpose(1, 2), k_buf, v_buf, valid, ctx)
        return out.transpose(1, 2)

    def _attend_slot(self, li: int, q: torch.Tensor, slots: list[int], q_pos: torch.Tensor) -> torch.Tensor:
        """Attends on the slot rings in place, one SDPA call per run of consecutive slots."""
        ctx = self.contexts[li]
        out = torch.zeros_like(q)  # capture padding rows stay zero
        for lo, hi, rows in _slot_runs(slots):
            span = hi - lo
            row_t = torch.tensor(rows, device=self.device)  # rows come in slot order
            at = torch.tensor([slots[r] - lo for r in rows], device=self.device)
            if span == len(rows):
                q_run, qp = q[row_t], q_pos[row_t]
            else:  # idle slots inside the span get dummy queries
                q_run = q.new_zeros(span, *q.shape[1:])
                qp = q_pos.new_zeros(span, q_pos.shape[1])
                q_run[at], qp[at] = q[row_t], q_pos[row_t]
            kp = self.kpos[li][lo:hi][:, None, :]  # (span, 1, ring)
            qpe = qp[:, :, None]
            mask = (kp >= 0) & (kp <= qpe) & (kp > qpe - ctx)  # (span, frames, ring)
            attn = F.scaled_dot_product_attention(q_run, self.k[li][lo:hi], self.v[li][lo:hi], attn_mask=mask[:, None])
            attn = attn.masked_fill(~mask.any(-1)[:, None, :, None], 0)  # a query with no key outputs 0
            out[row_t] = attn[at]
        return out


def _slot_runs(slots: list[int]) -> list[tuple[int, int, list[int]]]:
    """Groups batch rows into spans of slot ids [lo, hi) with few idle slots: (lo, hi, row indices)."""
    order = sorted(range(len(slots)), key=slots.__getitem__)
    runs: list[tuple[int, int, list[int]]] = []
    for r in order:
        s = slots[r]
        if runs and s - runs[-1][1] <= SLOT_RUN_GAP:
            lo, _, rows = runs[-1]
            runs[-1] = (lo, s + 1, rows + [r])
        else:
            runs.append((s, s + 1, [r]))
    return runs


def _check_backend(backend: str, device: torch.device) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown codec_attention_backend {backend!r} (choose from {', '.join(BACKENDS)})")
    if backend == "triton" and device.type != "cuda":
        raise ValueError(
            f"codec_attention_backend 'triton' needs CUDA; the codec runs on {device.type}: use 'sdpa' or 'slot'"
        )
    if backend == "triton":
        raise ValueError(
            "codec_attention_backend 'triton': the Triton ring-attention kernel is not part of this build; use "
            "'sdpa' or 'slot'"
        )
