"""Which dtype a CPU stage runs in, and how many threads each stage gets.

bfloat16 pays on a CPU that has it in hardware (AVX-512 BF16 or AMX) and
costs on one that does not: measured on Qwen3-TTS 0.6B (issue 33), vLLM's
oneDNN bf16 linear took 0.5-0.6x the float32 time and the codec decoded a
frame in 22-27 ms (bf16) vs 54-70 ms (float32) on an AVX-512 BF16 host,
while on an AVX2-only host vLLM's oneDNN bf16 path cannot be created and
torch's bf16 linear is 1.3-2.5x slower than float32. So a stage left at
`auto` gets bfloat16 where the CPU has it and float32 elsewhere.

The answer comes from torch and oneDNN at run time, not from the CPU's name:
`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` make an AVX-512 host
answer as an AVX2-only one (both libraries read them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

BF16_SLOWDOWN_NO_NATIVE = "torch's bfloat16 linear ran 1.3-2.5x slower than float32 on an AVX2-only CPU (issue 33)"
WIDE_CAPABILITIES = ("AVX512", "AMX")  # ATen kernels built for AVX-512 or wider


@dataclass(frozen=True)
class CpuBf16:
    """Whether this CPU runs bfloat16 natively, and what said so."""

    native: bool
    evidence: str


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # what the stage runs in
    reason: str  # one line: why
    warning: str | None = None  # set when an explicit choice is known to be slow here

    def as_dict(self) -> dict:
        return {"dtype": self.dtype, "reason": self.reason, "warning": self.warning}


def probe_bf16() -> CpuBf16:
    """Asks torch (its ATen kernel level and cpuinfo) and oneDNN whether bfloat16 is native here."""
    import torch

    capability = str(torch.backends.cpu.get_cpu_capability())
    avx512_bf16 = bool(torch.cpu._is_avx512_bf16_supported())
    amx = bool(torch.cpu._is_amx_tile_supported())
    onednn = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    evidence = (f"torch capability {capability}, avx512_bf16 {'yes' if avx512_bf16 else 'no'}, "
                f"amx {'yes' if amx else 'no'}, oneDNN bf16 {'yes' if onednn else 'no'}")
    native = (avx512_bf16 or amx) and onednn and capability.upper().startswith(WIDE_CAPABILITIES)
    return CpuBf16(native=native, evidence=evidence)


def choose_dtype(requested: str, bf16: CpuBf16, *, stage: str) -> DtypeChoice:
    """The dtype a CPU stage runs in for the profile's `requested` ('auto' decides by the CPU)."""
    if requested == "auto":
        if bf16.native:
            return DtypeChoice("bfloat16", f"{stage}: bfloat16, this CPU has native bf16 ({bf16.evidence})")
        return DtypeChoice("float32", f"{stage}: float32, this CPU has no native bf16 ({bf16.evidence})")
    if requested == "bfloat16" and not bf16.native:
        return DtypeChoice("bfloat16", f"{stage}: bfloat16 as the profile says ({bf16.evidence})",
                           warning=f"{stage} runs in bfloat16 on a CPU without native bf16 ({bf16.evidence}): "
                                   f"{BF16_SLOWDOWN_NO_NATIVE}; set {stage}.dtype=auto for float32")
    return DtypeChoice(requested, f"{stage}: {requested} as the profile says")


def split_threads(talker: int, codec: int, cores: int | None = None) -> tuple[int, int]:
    """(talker, codec) thread counts; 0 splits the cores between the two stages.

    Two stages that each run as many threads as there are cores stall each other (issue 33: a talker
    step of 0.05-0.3 ms took 5-62 ms while the codec held a core). The talker gets the larger half:
    it runs every step, the codec decodes in bursts.
    """
    n = cores if cores is not None else available_cores()
    codec_share = max(1, n // 2)
    talker_share = max(1, n - codec_share)
    return (talker or talker_share, codec or codec_share)


def available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
