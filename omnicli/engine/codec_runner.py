"""Stage 1 model runner: executes one batch of chunks on the codec decoder.

Each request owns a slot; a slot holds, per decoder layer, a ring of keys
and values (and the absolute position of each entry). A step takes ragged
chunks from several slots, pads them into one batch, writes each chunk's
keys/values into its slot's rings, attends, and returns PCM per row.
Padding (ragged tails, rows added to reach a capture size) never writes to
any ring and never advances any slot.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from omnicli.engine.models.codec import CodecDecoder

BACKENDS = ("sdpa", "slot", "triton")


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
        if backend not in BACKENDS:
            raise ValueError(f"unknown codec attention backend {backend!r} (choose from {', '.join(BACKENDS)})")
        if backend == "triton" and not str(device).startswith("cuda"):
            raise ValueError("codec_attention_backend 'triton' needs CUDA; use 'sdpa' or 'slot' on this machine")
        if backend == "triton":
            raise ValueError("codec_attention_backend 'triton' is not built yet; use 'sdpa' or 'slot'")
        self.decoder = decoder
        self.backend = backend
        self.device = torch.device(device)
        cfg = decoder.cfg
        self.contexts = list(contexts or cfg.contexts)
        if len(self.contexts) != cfg.num_layers:
            raise ValueError(f"layer_contexts needs {cfg.num_layers} entries (one per codec layer), got {len(self.contexts)}")
        self.ring_sizes = [c + max_chunk_frames if ring_headroom else c for c in self.contexts]
        self.capture_sizes = sorted(capture_sizes) if capture_sizes else None
        self.num_slots = num_slots
        self.hop = cfg.hop
        heads, head_dim = cfg.num_heads, cfg.dim // cfg.num_heads
        dtype = next(decoder.parameters()).dtype
        self.k = [torch.zeros(num_slots, heads, r, head_dim, dtype=dtype, device=self.device) for r in self.ring_sizes]
        self.v = [torch.zeros_like(k) for k in self.k]
        self.kpos = [torch.full((num_slots, r), -1, dtype=torch.long, device=self.device) for r in self.ring_sizes]
        self.pos = torch.zeros(num_slots, dtype=torch.long, device=self.device)

    def reset_slot(self, slot: int) -> None:
        """Forgets a finished request's state so the slot starts clean."""
        for kp in self.kpos:
            kp[slot] = -1
        self.pos[slot] = 0

    def padded_batch_size(self, rows: int) -> int:
        if not self.capture_sizes or rows > self.capture_sizes[-1]:
            return rows
        return self.capture_sizes[bisect.bisect_left(self.capture_sizes, rows)]

    @torch.no_grad()
    def execute(self, slots: Sequence[int], chunks: Sequence[np.ndarray], pad_to_frames: int = 0) -> list[np.ndarray]:
        """Decodes one chunk (frames, K) per slot; returns float32 PCM per chunk."""
        lengths = [len(c) for c in chunks]
        batch = self.padded_batch_size(len(chunks))
        frames = max(max(lengths), pad_to_frames)
        k_books = self.decoder.cfg.num_codebooks
        codes = torch.zeros(batch, frames, k_books, dtype=torch.long)
        for i, c in enumerate(chunks):
            codes[i, : len(c)] = torch.from_numpy(np.asarray(c, dtype=np.int64))
        codes = codes.to(self.device)
        n_real = len(chunks)
        # Padding rows borrow slot 0 for reads only; they never write.
        slot_idx = torch.tensor(list(slots) + [0] * (batch - n_real), device=self.device)
        length = torch.tensor(lengths + [0] * (batch - n_real), device=self.device)
        offsets = torch.arange(frames, device=self.device)
        q_valid = offsets[None, :] < length[:, None]  # (B, N)
        q_pos = self.pos[slot_idx][:, None] + offsets[None, :]  # absolute positions

        x = self.decoder.embed_codes(codes)
        for li, layer in enumerate(self.decoder.layers):
            q, k, v = layer.split_qkv(x)
            self._write(li, slots, lengths, q_pos, k, v)
            attend = self._attend_sdpa if self.backend == "sdpa" else self._attend_slot
            attn = attend(li, q, slot_idx, q_pos, q_valid, n_real)
            x = layer.finish(x, attn)
        pcm = self.decoder.to_pcm(x).float().cpu().numpy()
        for s, n in zip(slots, lengths):
            self.pos[s] += n
        return [pcm[i, : n * self.hop].copy() for i, n in enumerate(lengths)]

    def _write(self, li: int, slots, lengths, q_pos, k, v) -> None:
        ring = self.ring_sizes[li]
        for i, (s, n) in enumerate(zip(slots, lengths)):
            if n == 0:
                continue
            first = max(0, n - ring)  # earlier entries would be overwritten within this chunk
            pos = q_pos[i, first:n]
            idx = pos % ring
            self.k[li][s][:, idx] = k[i, :, first:n]
            self.v[li][s][:, idx] = v[i, :, first:n]
            self.kpos[li][s, idx] = pos

    def _mask(self, li: int, kpos: torch.Tensor, q_pos: torch.Tensor, q_valid: torch.Tensor) -> torch.Tensor:
        """(B, N, R) True where query attends key: written, not in the future, inside the window."""
        ctx = self.contexts[li]
        kp = kpos[:, None, :]
        qp = q_pos[:, :, None]
        mask = (kp >= 0) & (kp <= qp) & (kp > qp - ctx)
        # Padding queries attend to everything (their output is discarded) so no row is all -inf.
        return mask | ~q_valid[:, :, None]

    def _attend_sdpa(self, li, q, slot_idx, q_pos, q_valid, n_real):
        """Gathers each row's ring into contiguous K/V, then PyTorch SDPA."""
        k = self.k[li].index_select(0, slot_idx)
        v = self.v[li].index_select(0, slot_idx)
        mask = self._mask(li, self.kpos[li].index_select(0, slot_idx), q_pos, q_valid)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])

    def _attend_slot(self, li, q, slot_idx, q_pos, q_valid, n_real):
        """Attends on each slot's ring in place (no gather copy), one row at a time."""
        out = torch.zeros_like(q)
        for i in range(n_real):
            s = int(slot_idx[i])
            kp = self.kpos[li][s][None]
            mask = self._mask(li, kp, q_pos[i : i + 1], q_valid[i : i + 1])[0]  # (N, R)
            scores = torch.matmul(q[i], self.k[li][s].transpose(-1, -2)) * (q.shape[-1] ** -0.5)
            scores = scores.masked_fill(~mask, float("-inf"))
            out[i] = torch.matmul(torch.softmax(scores, dim=-1), self.v[li][s])
        return out
