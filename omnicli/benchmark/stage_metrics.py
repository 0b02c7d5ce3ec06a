"""Per-stage bench figures of one pass, for engines that report stages (vLLM-Omni's talker and codec).

Two kinds of time, kept apart because they answer different questions:

- in flight (`stage_<stage>_busy_s`, `stage_<stage>_time_ms_mean`): wall time a stage held a request,
  from its hand-over to the stage's last output. It includes waiting (the codec waits for the talker's
  chunks), so per-request times overlap and their sum can exceed the pass's duration; the busy figure is
  the union of the pass's intervals, never longer than the pass.
- CPU (`stage_<stage>_cpu_s`): CPU seconds the stage's processes (engine core and its workers) used
  during the pass, from the engine's counters (`EngineStats.stages`). Waiting on a socket costs none, a
  spinning reader does; several threads can use more than the pass's wall time (at most cores x wall).

Every figure covers one pass only: request figures come from the pass's records, CPU seconds from the
difference of two counter snapshots. The key names were checked against vLLM's and vLLM-Omni's bench
keys (`stage_durations`, `stage_gen_time_ms`, ...): `stage_talker_*` / `stage_codec_*` are omni's own.
The per-request figures are collected in omnicli/vllm_omni/stage_metrics.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from omnicli.engine.request import RequestInfo

STAGES = ("talker", "codec")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def busy_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: wall time at least one of them was open."""
    total, open_start, open_end = 0.0, None, None
    for start, end in sorted(intervals):
        if open_end is None or start > open_end:
            if open_end is not None and open_start is not None:
                total += open_end - open_start
            open_start, open_end = start, end
        else:
            open_end = max(open_end, end)
    if open_end is not None and open_start is not None:
        total += open_end - open_start
    return total


def _interval(entry: Mapping) -> tuple[float, float] | None:
    """A stage's (start, end) in perf_counter seconds, when the engine recorded when it handed it over."""
    start, gen_ms = entry.get("started_at"), entry.get("gen_time_ms")
    if start is None or gen_ms is None:
        return None
    return start, start + gen_ms / 1000.0


def summarize(infos: list[RequestInfo], counters: Mapping[str, float] | None = None,
              audio_seconds: float = 0.0) -> dict[str, float | None]:
    """One pass's stage figures: per-request means, in-flight (busy) seconds, and, from the pass's counter
    difference `counters` (EngineStats.stages), CPU seconds, also per second of audio (`audio_seconds`:
    the pass's audio). None where no request (or no counter) had the figure."""
    talker = [i.stages["talker"] for i in infos if i.stages.get("talker")]
    codec = [i.stages["codec"] for i in infos if i.stages.get("codec")]
    out: dict[str, float | None] = {
        "stage_talker_tokens_mean": _mean([s["tokens_out"] for s in talker]),
        "stage_talker_time_ms_mean": _mean([s["gen_time_ms"] for s in talker if s["gen_time_ms"] is not None]),
        "stage_talker_first_output_ms_mean": _mean(
            [s["first_output_ms"] for s in talker if s["first_output_ms"] is not None]
        ),
        "stage_codec_frames_mean": _mean([s.get("frames", 0) for s in codec]),
        "stage_codec_time_ms_mean": _mean([s["gen_time_ms"] for s in codec if s["gen_time_ms"] is not None]),
        "stage_codec_first_output_ms_mean": _mean(
            [s["first_output_ms"] for s in codec if s["first_output_ms"] is not None]
        ),
    }
    counters = counters or {}
    for name, entries in (("talker", talker), ("codec", codec)):
        intervals = [iv for iv in (_interval(s) for s in entries) if iv is not None]
        out[f"stage_{name}_busy_s"] = busy_seconds(intervals) if intervals else None
        cpu = counters.get(f"{name}_cpu_s")
        out[f"stage_{name}_cpu_s"] = cpu
        out[f"stage_{name}_cpu_s_per_audio_s"] = cpu / audio_seconds if cpu is not None and audio_seconds else None
    return out
