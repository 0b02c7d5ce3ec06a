"""Per-stage figures from vLLM-Omni's `stage_metrics` (on each request's final output).

vLLM-Omni reports, per request and stage, tokens in/out, the finish reason,
the stage's generation time and its time to first output (from the
request's arrival). We keep the figures a TTS benchmark reads beside its own
request-level TTFP/E2EL/RTF: talker tokens and time, codec frames and time,
first output per stage. The codec's frame count is ours (delivered samples
over the codec hop): vLLM-Omni's `audio_frames` counts samples, and counts
them again on every cumulative output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

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
    if info.stages.get("codec") is not None:
        info.stages["codec"]["frames"] = info.codec_frames


@dataclass
class StageTotals:
    """Sums over finished requests, for EngineStats (monotonic)."""

    requests: int = 0
    talker_tokens: int = 0
    talker_time_s: float = 0.0
    codec_frames: int = 0
    codec_time_s: float = 0.0
    talker_first_output_ms: float = 0.0
    codec_first_output_ms: float = 0.0

    def add(self, figures: dict, codec_frames: int = 0) -> None:
        talker, codec = figures.get("talker") or {}, figures.get("codec") or {}
        self.requests += 1
        self.talker_tokens += int(talker.get("tokens_out") or 0)
        self.talker_time_s += (talker.get("gen_time_ms") or 0.0) / 1000.0
        self.codec_frames += codec_frames
        self.codec_time_s += (codec.get("gen_time_ms") or 0.0) / 1000.0
        self.talker_first_output_ms += talker.get("first_output_ms") or 0.0
        self.codec_first_output_ms += codec.get("first_output_ms") or 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def summarize(infos: list[RequestInfo]) -> dict[str, float | None]:
    """Bench-result figures over the requests' stage figures: means per stage (None when no request had them)."""
    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    talker = [i.stages["talker"] for i in infos if i.stages.get("talker")]
    codec = [i.stages["codec"] for i in infos if i.stages.get("codec")]
    return {
        "stage_talker_tokens_mean": mean([s["tokens_out"] for s in talker]),
        "stage_talker_time_ms_mean": mean([s["gen_time_ms"] for s in talker if s["gen_time_ms"] is not None]),
        "stage_talker_first_output_ms_mean": mean(
            [s["first_output_ms"] for s in talker if s["first_output_ms"] is not None]
        ),
        "stage_codec_frames_mean": mean([s.get("frames", 0) for s in codec]),
        "stage_codec_time_ms_mean": mean([s["gen_time_ms"] for s in codec if s["gen_time_ms"] is not None]),
        "stage_codec_first_output_ms_mean": mean(
            [s["first_output_ms"] for s in codec if s["first_output_ms"] is not None]
        ),
    }
