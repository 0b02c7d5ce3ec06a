"""`Resample` as a module over the soxr `resample`; every other attribute raises when used."""

from __future__ import annotations

import torch
from _omnicli_missing import module_getattr

from torchaudio.functional import resample

__getattr__ = module_getattr(__name__)


class Resample(torch.nn.Module):
    def __init__(self, orig_freq: int = 16000, new_freq: int = 16000, **_options):
        super().__init__()
        self.orig_freq, self.new_freq = int(orig_freq), int(new_freq)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        return resample(waveform, self.orig_freq, self.new_freq)
