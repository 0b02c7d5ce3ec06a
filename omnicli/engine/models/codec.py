"""A small streaming neural codec: encoder (PCM -> codes) and decoder (codes -> PCM).

The decoder is what stage 1 runs. It is a causal transformer whose layers
attend to a sliding window of past frames (`contexts`, one per layer) and
keep that window in per-slot ring caches, followed by an upsampler whose
transposed convolutions have kernel == stride, so every frame's samples
depend on that frame's hidden state alone and chunked output concatenates
exactly.

Ring semantics (see ARCHITECTURE.md, "Ring caches"): a chunk's keys and
values are all written into the ring before the chunk attends. With a ring
of exactly `context` entries the chunk's newest entries overwrite the oldest
ones that its early tokens would still have seen; a ring of
`context + max_chunk` entries (headroom) never loses a key still in any
query's window, which makes chunked decoding equal whole-sequence decoding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

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
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return q, k, v

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual around attention output (B, heads, N, head_dim), then the FFN block."""
        b, _, n, _ = attn.shape
        x = x + self.out(attn.transpose(1, 2).reshape(b, n, -1))
        return x + self.ffn(self.norm2(x))


class Upsampler(nn.Module):
    """Frame rate -> sample rate with kernel == stride: no overlap between frames."""

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
        return self.net(h.transpose(1, 2)).squeeze(1)


class CodecDecoder(nn.Module):
    """Codes -> hidden states (windowed causal transformer) -> PCM."""

    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.ModuleList(nn.Embedding(cfg.codebook_size, cfg.dim) for _ in range(cfg.num_codebooks))
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.upsample = Upsampler(cfg)
        self.register_buffer("gain", torch.tensor(cfg.output_gain))

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
        contexts = contexts or self.cfg.contexts
        x = self.embed_codes(codes).unsqueeze(0)
        n = x.shape[1]
        pos = torch.arange(n)
        for layer, ctx in zip(self.layers, contexts):
            q, k, v = layer.split_qkv(x)
            dist = pos[:, None] - pos[None, :]
            mask = (dist >= 0) & (dist < ctx)
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = layer.finish(x, attn)
        return self.to_pcm(x)[0]


class StreamingCodec(nn.Module):
    def __init__(self, cfg: CodecConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = CodecEncoder(cfg)
        self.decoder = CodecDecoder(cfg)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
