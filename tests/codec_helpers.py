"""A tiny codec decoder and random codes shared by the stage-1 unit tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
import torch

from omnicli.engine.models.codec import CodecConfig, CodecDecoder


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: extra threads only spin against other work on a small machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_decoder(dtype=torch.float32, seed: int = 0, contexts: Sequence[int] = (3, 7, 5)) -> CodecDecoder:
    """Three layers with (by default) a different attention window each."""
    torch.manual_seed(seed)
    cfg = CodecConfig(
        hop=8, num_codebooks=2, codebook_size=16, dim=32, num_heads=2, ffn_dim=64,
        num_layers=3, contexts=list(contexts), encoder_channels=[8, 16], strides=[2, 4],
    )
    return CodecDecoder(cfg).to(dtype).eval()


def random_codes(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 16, size=(n, 2))
