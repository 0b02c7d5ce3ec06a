"""Which platform this machine runs the engine on."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def detect_platform() -> str:
    """'cuda' when torch sees a usable CUDA GPU, else 'cpu'."""
    try:
        import torch  # heavy: imported only when a profile says device: auto
    except ImportError:
        return "cpu"
    try:
        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # a broken driver is "no usable GPU", not a crash
        return "cpu"
