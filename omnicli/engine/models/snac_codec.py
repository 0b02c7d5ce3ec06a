"""SNAC 24 kHz (the Orpheus codec) through the `snac` package, as a windowed codec.

SNAC has three codebooks at strides 4, 2 and 1 of its 512-sample hop. One
Orpheus frame is 7 codes covering 2048 samples (85.3 ms at 24 kHz):
`[c0, c1a, c2a, c2b, c1b, c2c, c2d]`, i.e. one code of codebook 0, two of
codebook 1 and four of codebook 2, interleaved in that order.

The decoder's noise blocks draw `torch.randn` on every call, even in eval
mode. With `noise=False` they are removed (exactly the output with zero
noise), which makes decoding deterministic: streaming, batching and the
reference decoder can then be compared bit for bit.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from omnicli.engine.windowed import WindowCodec

if TYPE_CHECKING:
    from snac import SNAC  # untyped package: its model reads as Any

FRAME_CODES = 7
C1_COLS = (1, 4)
C2_COLS = (2, 3, 5, 6)
CONFIG_FILE = "config.json"
WEIGHTS_FILES = ("pytorch_model.bin", "model.safetensors")


def frames_to_snac(codes: torch.Tensor) -> list[torch.Tensor]:
    """(B, n, 7) -> SNAC's [c0 (B, n), c1 (B, 2n), c2 (B, 4n)]."""
    b, n, _ = codes.shape
    return [codes[:, :, 0], codes[:, :, list(C1_COLS)].reshape(b, 2 * n), codes[:, :, list(C2_COLS)].reshape(b, 4 * n)]


def snac_to_frames(c0: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor) -> torch.Tensor:
    """SNAC codes of one batch row set -> (B, n, 7)."""
    b, n = c0.shape
    out = torch.empty(b, n, FRAME_CODES, dtype=torch.long, device=c0.device)
    out[:, :, 0] = c0
    out[:, :, list(C1_COLS)] = c1.reshape(b, n, 2)
    out[:, :, list(C2_COLS)] = c2.reshape(b, n, 4)
    return out


def drop_noise(model: nn.Module) -> int:
    """Replaces SNAC's noise blocks by identities; returns how many there were."""
    from snac.layers import NoiseBlock

    count = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, NoiseBlock):
                setattr(module, name, nn.Identity())
                count += 1
    return count


def load_snac(folder: Path, *, noise: bool = True, dtype: str = "float32") -> SNAC:
    """SNAC from a folder in the published layout (config.json + pytorch_model.bin)."""
    from snac import SNAC

    from omnicli.model_files import ModelFileError, read_json

    config = read_json(folder / CONFIG_FILE)
    if not isinstance(config, dict):
        raise ModelFileError(f"{folder / CONFIG_FILE}: not a JSON object; the file is damaged")
    model = SNAC(**config)
    weights = next(folder / f for f in WEIGHTS_FILES if (folder / f).is_file())
    if weights.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(weights))
    else:
        try:  # weights_only: a pickle holding anything but tensors is refused, never run
            state = torch.load(weights, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            why = next((line for line in lines if "GLOBAL" in line or "Unsupported" in line), lines[0] if lines else "")
            raise ModelFileError(
                f"{weights}: refused: the pickle holds Python objects beyond plain tensors, which omni never "
                f"loads (torch.load weights_only=True: {why}); use the published weights or a .safetensors file"
            ) from None
    model.load_state_dict(state)
    if not noise:
        drop_noise(model)
    return model.eval().to(getattr(torch, dtype))


class SnacReferenceEncoder(nn.Module):
    """Reference PCM (24 kHz, 1-D) -> Orpheus frames (n, 7); used by the reference cache."""

    def __init__(self, snac: SNAC):
        super().__init__()
        self.snac = snac

    def forward(self, pcm: torch.Tensor) -> torch.Tensor:
        c0, c1, c2 = self.snac.encode(pcm.reshape(1, 1, -1))
        return snac_to_frames(c0, c1, c2)[0]


class SnacCodec(WindowCodec):
    """The windowed-codec face of SNAC for the engine's WindowedRunner."""

    num_codebooks = FRAME_CODES
    encoder: SnacReferenceEncoder

    def __init__(self, snac: SNAC, *, lookback: int, lookahead: int, overlap: int = 0):
        super().__init__()
        self.snac = snac
        self.encoder = SnacReferenceEncoder(snac)
        self.sample_rate = int(snac.sampling_rate)
        self.hop = int(snac.hop_length) * int(snac.vq_strides[0])  # samples per 7-code frame
        self.lookback, self.lookahead, self.overlap = lookback, lookahead, overlap

    def decode_frames(self, codes: torch.Tensor) -> torch.Tensor:
        audio = self.snac.decode(frames_to_snac(codes.long()))
        return audio[:, 0, :]

    def encode_frames(self, pcm: np.ndarray) -> np.ndarray:
        dtype = next(self.snac.parameters()).dtype
        with torch.no_grad():
            return self.encoder(torch.from_numpy(np.asarray(pcm, np.float32)).to(dtype)).cpu().numpy()
