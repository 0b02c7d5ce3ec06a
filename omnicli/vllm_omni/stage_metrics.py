"""Per-stage figures from vLLM-Omni's `stage_metrics` (on each request's final output).

vLLM-Omni reports, per request and stage, tokens in/out, the finish reason,
the stage's generation time and its time to first output (from the
request's arrival). We keep the figures a TTS benchmark reads beside its own
request-level TTFP/E2EL/RTF: talker tokens and time, codec frames and time,
first output per stage. The codec's frame count is ours (delivered samples
over the codec hop): vLLM-Omni's `audio_frames` counts samples, and counts
them again on every cumulative output. Each stage's in-flight interval
starts when the request was handed over (vLLM-Omni submits every stage of a
streaming pipeline then: the codec request is prewarmed at arrival) and lasts
the stage's `stage_gen_time_ms`. StageCounters keeps the engine's per-stage
counters, CPU seconds of each stage's processes among them. A pass's figures
are made from these in omnicli/benchmark/stage_metrics.py.
"""

from __future__ import annotations

import re
from typing import Any

import psutil

from omnicli.engine.request import RequestInfo

TALKER, CODEC = "0", "1"
FRAME_RATE = 12.5  # codec frames per second of both families' tokenizers


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def from_output(final) -> dict[str, dict[str, Any]]:
    """{"talker": {...}, "codec": {...}} from a final output's metrics; {} when it carries none."""
    metrics = getattr(final, "metrics", None) or {}
    stages = metrics.get("stage_metrics") if isinstance(metrics, dict) else None
    if not isinstance(stages, dict):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for key, name in ((TALKER, "talker"), (CODEC, "codec")):
        m = stages.get(key) or stages.get(int(key)) or {}
        if not isinstance(m, dict):
            continue
        first_ms = _num(m.get("serving_time_to_first_output_ms"))
        entry = {
            "finish_reason": m.get("finish_reason"),
            "tokens_in": int(m.get("num_tokens_in") or 0),
            "tokens_out": int(m.get("num_tokens_out") or 0),
            "gen_time_ms": _num(m.get("stage_gen_time_ms")),
            "first_output_ms": first_ms,
        }
        if name == "talker":
            gaps = [g for g in (_num(x) for x in m.get("inter_output_latencies_ms") or []) if g is not None]
            entry["inter_output_ms"] = gaps
        out[name] = entry
    return out


def fill_info(info: RequestInfo, figures: dict, samples: int, sample_rate: int, handed_at: float) -> None:
    """Fills the request's RequestInfo from the stage figures and the delivered audio.

    `handed_at` is perf_counter() when the request went to vLLM-Omni, which
    times first outputs from its arrival (the same moment, within a millisecond).
    """
    info.codec_frames = round(samples * FRAME_RATE / sample_rate) if sample_rate else 0
    talker = figures.get("talker") or {}
    if talker:
        reason = talker.get("finish_reason")
        info.finish_reason = "length" if reason == "length" else "stop"
        info.talker_tokens = talker["tokens_out"]
        if talker.get("first_output_ms") is not None:
            info.first_token_at = handed_at + talker["first_output_ms"] / 1000.0
            t, times = info.first_token_at, [info.first_token_at]
            for gap in talker.get("inter_output_ms") or []:
                t += gap / 1000.0
                times.append(t)
            info.token_times = times
    info.stages = {name: {k: v for k, v in entry.items() if k != "inter_output_ms"} for name, entry in figures.items()}
    for entry in info.stages.values():
        entry["started_at"] = handed_at  # perf_counter(): with gen_time_ms, the stage's in-flight interval
    if info.stages.get("codec") is not None:
        info.stages["codec"]["frames"] = info.codec_frames


# vLLM-Omni titles each stage's engine-core process `VLLM::StageEngineCoreProc_stage<N>_replica..._DP...`;
# the stage's workers are that process's descendants.
_STAGE_TITLE = re.compile(r"StageEngineCoreProc_stage(\d+)_")
STAGE_NAMES = {TALKER: "talker", CODEC: "codec"}


def stage_of(proc: psutil.Process) -> str | None:
    """"talker" / "codec" for a stage's engine core or one of its workers; None otherwise (or gone)."""
    try:
        for p in (proc, *proc.parents()):
            if match := _STAGE_TITLE.search(" ".join(p.cmdline())):
                return STAGE_NAMES.get(match.group(1))
    except psutil.Error:
        return None
    return None


class StageCounters:
    """The engine's per-stage counters (monotonic; EngineStats.stages): requests, talker tokens, codec
    frames, and each stage's CPU seconds (user + system of its processes, read when asked)."""

    def __init__(self, processes: list[psutil.Process]):
        stages = {p.pid: stage_of(p) for p in processes}
        self._stage = {pid: name for pid, name in stages.items() if name is not None}
        self._processes = [p for p in processes if p.pid in self._stage]
        self._cpu: dict[int, float] = {}  # pid -> last CPU seconds read (kept once the process is gone)
        self.requests = 0
        self.talker_tokens = 0
        self.codec_frames = 0

    def add(self, figures: dict, codec_frames: int = 0) -> None:
        self.requests += 1
        self.talker_tokens += int((figures.get("talker") or {}).get("tokens_out") or 0)
        self.codec_frames += codec_frames

    def cpu_seconds(self) -> dict[str, float]:
        for proc in self._processes:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            self._cpu[proc.pid] = times.user + times.system
        out = {name: 0.0 for name in STAGE_NAMES.values()}
        for pid, seconds in self._cpu.items():
            out[self._stage[pid]] += seconds
        return out

    def to_dict(self) -> dict[str, float]:
        cpu = self.cpu_seconds()
        return {"requests": self.requests, "talker_tokens": self.talker_tokens, "codec_frames": self.codec_frames,
                **{f"{name}_cpu_s": cpu[name] for name in STAGE_NAMES.values()}}
