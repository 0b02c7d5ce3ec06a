"""Reference (voice prompt) encoding with a content-addressed cache.

A reference is identified by the sha256 of its PCM at the codec's rate, so
the same prompt used by many requests is encoded once ("cold") and then
served from memory ("hot").
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

from omnicli.audio import resample, to_mono


class ReferenceCache:
    def __init__(self, encoder: nn.Module, sample_rate: int, max_samples: int, capacity: int = 1024) -> None:
        self._encoder = encoder
        self._sample_rate = sample_rate
        self._max_samples = max_samples
        self._capacity = capacity
        self._codes: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hot = 0
        self.cold = 0

    def prepare(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Any rate, any channel count -> mono float32 at the codec rate, at most `max_samples`."""
        mono = resample(to_mono(np.asarray(pcm, dtype=np.float32)), sample_rate, self._sample_rate)
        return np.ascontiguousarray(mono[: self._max_samples])

    def key(self, pcm: np.ndarray) -> str:
        return hashlib.sha256(pcm.tobytes()).hexdigest()

    def lookup(self, key: str) -> np.ndarray | None:
        with self._lock:
            codes = self._codes.get(key)
            if codes is not None:
                self._codes.move_to_end(key)
                self.hot += 1
            return codes

    def count_hot(self) -> None:
        """Counts a request served by an encoding another request started."""
        with self._lock:
            self.hot += 1

    def encode(self, key: str, pcm: np.ndarray) -> np.ndarray:
        """Encodes (runs torch; call off the event loop) and stores the codes."""
        dtype = next(self._encoder.parameters()).dtype
        device = next(self._encoder.parameters()).device
        with torch.no_grad():
            codes = self._encoder(torch.from_numpy(pcm).to(device=device, dtype=dtype)).cpu().numpy()
        with self._lock:
            self.cold += 1
            self._codes[key] = codes
            while len(self._codes) > self._capacity:
                self._codes.popitem(last=False)
        return codes
