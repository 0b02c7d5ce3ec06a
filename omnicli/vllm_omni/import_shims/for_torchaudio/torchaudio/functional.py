"""`melscale_fbanks` in plain torch and `resample` through soxr; every other attribute raises when used."""

from __future__ import annotations

import math

import numpy as np
import soxr
import torch
from _omnicli_missing import module_getattr

__getattr__ = module_getattr(__name__)


def _hz_to_mel(freq: torch.Tensor, mel_scale: str) -> torch.Tensor:
    if mel_scale == "htk":
        return 2595.0 * torch.log10(1.0 + freq / 700.0)
    # Slaney: linear below 1 kHz, logarithmic above (27 mels per factor 6.4).
    linear = 3.0 * freq / 200.0
    log_part = 15.0 + torch.log(torch.clamp(freq, min=1e-10) / 1000.0) * (27.0 / math.log(6.4))
    return torch.where(freq >= 1000.0, log_part, linear)


def _mel_to_hz(mels: torch.Tensor, mel_scale: str) -> torch.Tensor:
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    linear = 200.0 * mels / 3.0
    log_part = 1000.0 * torch.exp((math.log(6.4) / 27.0) * (mels - 15.0))
    return torch.where(mels >= 15.0, log_part, linear)


def melscale_fbanks(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int,
                    norm: str | None = None, mel_scale: str = "htk") -> torch.Tensor:
    """Triangular mel filters, shape (n_freqs, n_mels), with torchaudio's signature and conventions."""
    if mel_scale not in ("htk", "slaney"):
        raise ValueError(f"mel_scale must be 'htk' or 'slaney', not {mel_scale!r}")
    if norm not in (None, "slaney"):
        raise ValueError(f"norm must be None or 'slaney', not {norm!r}")
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=torch.float64)
    lo, hi = (
        _hz_to_mel(torch.tensor(float(f_min), dtype=torch.float64), mel_scale),
        _hz_to_mel(torch.tensor(float(f_max), dtype=torch.float64), mel_scale),
    )
    f_pts = _mel_to_hz(torch.linspace(float(lo), float(hi), n_mels + 2, dtype=torch.float64), mel_scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    rising = -slopes[:, :-2] / f_diff[:-1]
    falling = slopes[:, 2:] / f_diff[1:]
    fb = torch.clamp(torch.minimum(rising, falling), min=0.0)
    if norm == "slaney":  # equal area per filter
        fb = fb * (2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])).unsqueeze(0)
    return fb.to(torch.float32)


def resample(waveform: torch.Tensor, orig_freq: int, new_freq: int, **_quality_options) -> torch.Tensor:
    """Resamples along the last axis with soxr (its high quality setting); torchaudio's filter options
    are not honoured."""
    if int(orig_freq) == int(new_freq):
        return waveform
    x = waveform.detach().to("cpu", torch.float32).numpy()
    flat = x.reshape(-1, x.shape[-1])
    out = np.stack([soxr.resample(row, int(orig_freq), int(new_freq)) for row in flat])
    return torch.from_numpy(out.reshape(*x.shape[:-1], out.shape[-1])).to(waveform.device, waveform.dtype)
