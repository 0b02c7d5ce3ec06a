"""Groups a request's codec frames into the chunks stage 1 decodes.

Sizes: the first chunk after `initial_codec_chunk_frames`, then every
`codec_chunk_frames`. A `codec_chunk_ramp` such as [1, 4, 15] replaces the
first sizes (its first entry overrides the initial size). Each request has
its own Chunker, so requests advance through the ramp independently. At the
end, `flush` returns the final partial chunk, or an empty array: the bare
terminal message, which carries no codes.

A family may have its own sizes (`ModelAdapter.stream_geometry`: NeuTTS
Air's windowed codec re-decodes 56 context frames per chunk, so it wants
few, long chunks): `stream_geometry` applies them when the profile sets
none of the three geometry keys (no file and no --set names them); a
profile that sets any of them gets exactly what it says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile
    from omnicli.profile.schema import CodecStageConfig

GEOMETRY_KEYS = ("initial_codec_chunk_frames", "codec_chunk_frames", "codec_chunk_ramp")


def stream_geometry(resolved: ResolvedProfile, family: tuple[tuple[int, ...], int] | None) -> CodecStageConfig:
    """The codec section with the family's chunk sizes (first chunks, steady size) where the profile chose none."""
    cfg = resolved.profile.codec
    chosen = any(resolved.origins.get(f"codec.{k}", "default") != "default" for k in GEOMETRY_KEYS)
    if family is None or chosen:
        return cfg
    ramp, steady = family
    return cfg.model_copy(update={"initial_codec_chunk_frames": ramp[0], "codec_chunk_frames": steady,
                                  "codec_chunk_ramp": list(ramp)})


def describe_geometry(cfg: CodecStageConfig) -> str:
    """'5/10/20+80': the first chunks' sizes, then the steady size."""
    first = cfg.codec_chunk_ramp or [cfg.initial_codec_chunk_frames]
    return "/".join(str(n) for n in first) + f"+{cfg.codec_chunk_frames}"


class Chunker:
    """Takes sizes the profile schema has validated (all >= 1, a non-empty ramp); it does not re-check them."""

    def __init__(self, num_codebooks: int, initial_frames: int, chunk_frames: int, ramp: Sequence[int] | None = None):
        self._sizes = list(ramp) if ramp else [initial_frames]
        self._steady = chunk_frames
        self._buf = np.zeros((0, num_codebooks), dtype=np.int64)
        self.chunks_emitted = 0

    @classmethod
    def from_config(cls, num_codebooks: int, cfg: CodecStageConfig) -> Chunker:
        return cls(num_codebooks, cfg.initial_codec_chunk_frames, cfg.codec_chunk_frames, cfg.codec_chunk_ramp)

    @property
    def max_chunk_frames(self) -> int:
        """The largest chunk this chunker can emit (what a ring's headroom must cover)."""
        return max(*self._sizes, self._steady)

    def next_size(self) -> int:
        return self._sizes[self.chunks_emitted] if self.chunks_emitted < len(self._sizes) else self._steady

    def feed(self, frames: np.ndarray) -> list[np.ndarray]:
        """Adds frames (n, K); returns every chunk that became complete, in order."""
        self._buf = np.concatenate([self._buf, np.asarray(frames, dtype=np.int64)])
        out = []
        while len(self._buf) >= (size := self.next_size()):
            out.append(self._buf[:size])
            self._buf = self._buf[size:]
            self.chunks_emitted += 1
        return out

    def flush(self) -> np.ndarray:
        """The final partial chunk; empty (0, K) when nothing is left: the bare terminal message."""
        rest, self._buf = self._buf, self._buf[:0]
        if len(rest):
            self.chunks_emitted += 1
        return rest
