"""A small streaming neural codec: encoder (PCM -> codes) and decoder (codes -> PCM).

The decoder is what stage 1 runs. It is a causal transformer whose layers
attend to a sliding window of past frames (`contexts`, one per layer) and
keep that window in per-slot ring caches, followed by an upsampler whose
transposed convolutions have kernel == stride, so every frame's samples
depend on that frame's hidden state alone and chunked output concatenates
exactly.

Ring semantics (docs/engine.md, stage 1): a chunk's keys and
values are all written into the ring before the chunk attends. With a ring
of exactly `context` entries the chunk's newest entries overwrite the oldest
ones that its early tokens would still have seen; a ring of
`context + max_chunk` entries (headroom) never loses a key still in any
query's window, which makes chunked decoding equal whole-sequence decoding.

Bit-exactness (float64) between chunked and whole-sequence decoding rests
on two rules that both paths share through this module:

- every matrix product runs over token rows padded to a multiple of
  `ROW_TILE`, so each row is computed by the same BLAS micro-kernel whatever
  the batch shape (an edge tile of a GEMM uses a different kernel and a
  different summation order);
- attention is computed per query over its own window of exactly `context`
  keys ordered by absolute position (`window_attention`), so a query sees
  the same keys in the same order in both paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class CodecConfig:
    sample_rate: int = 24000
    hop: int = 1920  # samples per frame: 24000 / 1920 = 12.5 frames/s
    num_codebooks: int = 4
    codebook_size: int = 256
    latent_dim: int = 64  # encoder VQ space
    dim: int = 256  # decoder width
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int = 1024
    contexts: list[int] = field(default_factory=lambda: [16, 32, 32, 64])  # frames, per layer
    encoder_channels: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    strides: list[int] = field(default_factory=lambda: [5, 6, 8, 8])  # encoder strides; product == hop
    output_gain: float = 1.0

    def to_dict(self) -> dict:
        return asdict(self)


class CodecEncoder(nn.Module):
    """Strided convolutions down to the frame rate, then residual vector quantisation."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        assert math.prod(cfg.strides) == cfg.hop
        layers: list[nn.Module] = []
        c_in = 1
        for c_out, s in zip(cfg.encoder_channels, cfg.strides):
            layers += [nn.Conv1d(c_in, c_out, kernel_size=s, stride=s), nn.GELU()]
            c_in = c_out
        self.convs = nn.Sequential(*layers[:-1])  # no activation after the last conv
        self.proj = nn.Linear(c_in, cfg.latent_dim)
        self.codebooks = nn.Parameter(torch.randn(cfg.num_codebooks, cfg.codebook_size, cfg.latent_dim))
        self.hop = cfg.hop

    @torch.no_grad()
    def forward(self, pcm: torch.Tensor) -> torch.Tensor:
        """pcm: (samples,) float -> codes: (frames, num_codebooks) int64."""
        frames = max(1, math.ceil(pcm.shape[0] / self.hop))
        x = F.pad(pcm, (0, frames * self.hop - pcm.shape[0]))
        h = self.convs(x.view(1, 1, -1)).squeeze(0).transpose(0, 1)  # (frames, channels)
        residual = self.proj(h)
        codes = []
        for book in self.codebooks:  # residual VQ: each codebook quantises what is left
            idx = torch.cdist(residual, book).argmin(dim=-1)
            codes.append(idx)
            residual = residual - book[idx]
        return torch.stack(codes, dim=-1)


ROW_TILE = 16  # GEMM row padding; a multiple of the BLAS row tiles seen on x86 (4 with AVX2, 8 with AVX-512)


def rowwise(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Applies a row-wise `fn` to x (..., features) with the row count padded to a multiple of ROW_TILE."""
    lead = x.shape[:-1]
    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[0]
    extra = -n % ROW_TILE
    if extra:
        rows = torch.cat([rows, rows.new_zeros(extra, rows.shape[1])])
    out = fn(rows)[:n]
    return out.reshape(*lead, out.shape[-1])


def window_attention(
    q: torch.Tensor, k_buf: torch.Tensor, v_buf: torch.Tensor, valid: torch.Tensor, context: int
) -> torch.Tensor:
    """Each query attends to its own window of `context` keys, oldest first.

    q: (B, N, H, D). k_buf, v_buf: (B, N + context - 1, H, D), contiguous,
    ordered by absolute position: query n's window is buffer rows
    n .. n + context - 1 (missing keys zero-filled). valid: (B, N + context - 1).
    The windows are strided views of the buffers (no copy); each (query,
    head) is one SDPA problem of 1 query over `context` keys, so its result
    does not depend on the batch around it. A query with no valid key gets
    a zero output. Returns (B, N, H, D).
    """
    b, n, h, d = q.shape
    length = k_buf.shape[1]
    if length != n + context - 1 or not (k_buf.is_contiguous() and v_buf.is_contiguous()):
        raise ValueError(
            f"window_attention needs contiguous buffers of {n + context - 1} rows, got {tuple(k_buf.shape)}"
        )
    # (B, N*H, context, D) with query-head i = n*H + h reading rows n.. of head h.
    shape, strides = (b, n * h, context, d), (length * h * d, d, h * d, 1)
    k_win = k_buf.as_strided(shape, strides, k_buf.storage_offset())
    v_win = v_buf.as_strided(shape, strides, v_buf.storage_offset())
    mask = valid.unfold(1, context, 1)  # (B, N, context)
    mask = mask | ~mask.any(-1, keepdim=True)  # fully masked: attend to the zero-filled window, output 0
    mask = mask[:, :, None, :].expand(b, n, h, context).reshape(b, n * h, 1, context)
    out = F.scaled_dot_product_attention(q.reshape(b, n * h, 1, d), k_win, v_win, attn_mask=mask)
    return out.view(b, n, h, d)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.dim // cfg.num_heads
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.out = nn.Linear(cfg.dim, cfg.dim)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.ffn = nn.Sequential(nn.Linear(cfg.dim, cfg.ffn_dim), nn.GELU(), nn.Linear(cfg.ffn_dim, cfg.dim))

    def split_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (B, N, dim) -> q, k, v each (B, heads, N, head_dim)."""
        b, n, _ = x.shape
        qkv = rowwise(lambda r: self.qkv(self.norm1(r)), x).view(b, n, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return q, k, v

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual around attention output (B, heads, N, head_dim), then the FFN block."""
        b, _, n, _ = attn.shape
        x = x + rowwise(self.out, attn.transpose(1, 2).reshape(b, n, -1))
        return x + rowwise(lambda r: self.ffn(self.norm2(r)), x)


class Upsampler(nn.Module):
    """Frame rate -> sample rate with kernel == stride: no overlap between frames.

    A transposed convolution whose kernel equals its stride maps each input
    step to `stride` output steps on its own, i.e. it is one matrix product
    per row; computing it that way keeps every frame's samples independent of
    the batch shape (see ROW_TILE).
    """

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        chans = [cfg.dim, *reversed(cfg.encoder_channels[:-1]), 1]
        strides = list(reversed(cfg.strides))
        layers: list[nn.Module] = []
        for i, s in enumerate(strides):
            layers.append(nn.ConvTranspose1d(chans[i], chans[i + 1], kernel_size=s, stride=s))
            if i < len(strides) - 1:
                layers.append(nn.GELU())
        self.net = nn.Sequential(*layers)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (B, N, dim) -> pcm (B, N * hop)."""
        b = h.shape[0]
        x = h.reshape(-1, h.shape[-1])  # one row per time step
        for layer in self.net:
            if isinstance(layer, nn.ConvTranspose1d):
                c_in, c_out, k = layer.weight.shape
                # row j*c_out+co: output step j, channel co
                weight = layer.weight.permute(2, 1, 0).reshape(k * c_out, c_in)
                assert layer.bias is not None  # built with a bias above
                bias = layer.bias.repeat(k)
                x = rowwise(lambda r: F.linear(r, weight, bias), x).reshape(-1, c_out)
            else:
                x = layer(x)
        return x.reshape(b, -1)


class CodecDecoder(nn.Module):
    """Codes -> hidden states (windowed causal transformer) -> PCM."""

    gain: torch.Tensor  # a registered buffer (nn.Module's attribute lookup does not say so)

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.ModuleList(nn.Embedding(cfg.codebook_size, cfg.dim) for _ in range(cfg.num_codebooks))
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.upsample = Upsampler(cfg)
        self.register_buffer("gain", torch.tensor(cfg.output_gain))

    @property
    def blocks(self) -> list[DecoderLayer]:
        """The transformer layers, typed (iterating an nn.ModuleList yields plain Modules)."""
        return cast("list[DecoderLayer]", list(self.layers))

    def embed_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """codes: (..., num_codebooks) -> (..., dim)."""
        return sum(emb(codes[..., i]) for i, emb in enumerate(self.embed))

    def to_pcm(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.upsample(self.norm(h)) * self.gain)

    @torch.no_grad()
    def decode_full(self, codes: torch.Tensor, contexts: list[int] | None = None) -> torch.Tensor:
        """Whole-sequence reference decode: codes (N, K) -> pcm (N * hop,).

        Each position attends to the `context` most recent positions including
        itself, exactly the window a streaming decode with ring headroom sees.
        """
        contexts = list(contexts or self.cfg.contexts)
        x = self.embed_codes(codes.to(self.gain.device)).unsqueeze(0)
        n = x.shape[1]
        for layer, ctx in zip(self.blocks, contexts):
            q, k, v = (t.transpose(1, 2) for t in layer.split_qkv(x))  # (1, N, H, D)
            # Position-ordered buffers with ctx - 1 missing (zero) keys before position 0.
            k_buf = F.pad(k, (0, 0, 0, 0, ctx - 1, 0)).contiguous()
            v_buf = F.pad(v, (0, 0, 0, 0, ctx - 1, 0)).contiguous()
            valid = (torch.arange(n + ctx - 1, device=x.device) >= ctx - 1)[None]
            attn = window_attention(q, k_buf, v_buf, valid, ctx)
            x = layer.finish(x, attn.transpose(1, 2))
        return self.to_pcm(x)[0]


class StreamingCodec(nn.Module):
    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = CodecEncoder(cfg)
        self.decoder = CodecDecoder(cfg)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
