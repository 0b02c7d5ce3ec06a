"""What a profile's `auto` dtypes and `0` thread counts become on this machine, for both engines.

The native engine and the vLLM-Omni overlay ask the same question at engine
start; the answer is logged once and recorded in the engine's stats.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from omnicli.profile.schema import Profile
from omnicli.runtime.cpu_dtype import CpuBf16, DtypeChoice, choose_dtype, probe_bf16, split_threads


@dataclass(frozen=True)
class CpuStages:
    """The talker's and the codec's dtype (with reasons) and thread counts on a CPU run."""

    talker: DtypeChoice
    codec: DtypeChoice
    talker_threads: int
    codec_threads: int

    def as_dict(self) -> dict:
        return {"talker_dtype": self.talker.as_dict(), "codec_dtype": self.codec.as_dict(),
                "talker_threads": self.talker_threads, "codec_threads": self.codec_threads}

    def describe(self) -> str:
        """The line printed at engine start."""
        return (f"CPU stages: {self.talker.reason}; {self.codec.reason}; threads talker {self.talker_threads}, "
                f"codec {self.codec_threads}")

    def warnings(self) -> list[str]:
        return [w for w in (self.talker.warning, self.codec.warning) if w]

    def announce(self, log: logging.Logger) -> None:
        """Says once, at engine start, what was chosen and why (stderr; a slow explicit choice as a warning)."""
        from omnicli.runtime.console import note

        note(self.describe())
        for warning in self.warnings():
            log.warning(warning)


def resolve_cpu_stages(profile: Profile, *, cores: int | None = None,
                       probe: Callable[[], CpuBf16] = probe_bf16) -> CpuStages:
    """The CPU choices for `profile` (call only for a CPU run: the probe imports torch)."""
    bf16 = probe()
    talker_threads, codec_threads = split_threads(profile.talker.threads, profile.codec.threads, cores)
    return CpuStages(
        talker=choose_dtype(profile.talker.dtype, bf16, stage="talker"),
        codec=choose_dtype(profile.codec.dtype, bf16, stage="codec"),
        talker_threads=talker_threads,
        codec_threads=codec_threads,
    )
