"""Run SIM / MOS scorers over a folder of generated speech (`omni eval`).

`AudioStage` feeds each row's 16 kHz clip to the loaded scorers in batches,
judges the `low_sim` / `low_mos` retention reasons and keeps one
`AudioResult` per row in manifest order; `score_audio` runs it alone over a
folder and `audio_summary` turns the results into summary keys. Every row ends with a
status and every scorer failure with an error text: nothing is silently skipped.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.evaluation.clips import MAX_CLIP_SECONDS
from omnicli.evaluation.loop import DecodeOnce, score_rows
from omnicli.evaluation.results import EvalStatus
from omnicli.evaluation.scorers.base import SAMPLE_RATE, ScoreItem, Scorer
from omnicli.manifest import ManifestRow
from omnicli.retention import Reason, Retainer
from omnicli.runtime.clock import utc_now

log = logging.getLogger(__name__)

MOS_RETENTION_KEYS = ("dnsmos_ovrl", "utmos")  # the overall figures `low_mos` is judged on


@dataclass
class AudioResult:
    utt: str
    ref: str
    status: EvalStatus  # one of OK, MISSING, EMPTY_AUDIO, UNREADABLE
    reference: str | None = None
    audio_s: float | None = None
    values: dict[str, float] = field(default_factory=dict)  # sim, dnsmos_*, utmos
    errors: dict[str, str] = field(default_factory=dict)  # metric -> why it has no value
    cpu_s: dict[str, float] = field(default_factory=dict)  # metric -> CPU seconds (the batch's shared evenly)
    notes: list[str] = field(default_factory=list)  # what the scores cannot show (omnicli.evaluation.clips)
    reasons: list[str] = field(default_factory=list)
    retained: str | None = None
    error: str | None = None  # why the generated audio could not be scored at all


@dataclass
class AudioRun:
    results: list[AudioResult]
    scorers: list[dict[str, Any]]  # each scorer's describe(), with its metric
    cpu_seconds: dict[str, float]  # metric -> CPU seconds inside the scorers
    wall_seconds: dict[str, float]  # metric -> wall seconds inside the scorers
    started_at: str
    wall_total: float


def _judge(result: AudioResult, sim_threshold: float, mos_threshold: float) -> list[str]:
    reasons: list[str] = []
    sim = result.values.get("sim")
    if sim is not None and sim < sim_threshold:
        reasons.append(Reason.LOW_SIM)
    if any(result.values.get(k) is not None and result.values[k] < mos_threshold for k in MOS_RETENTION_KEYS):
        reasons.append(Reason.LOW_MOS)
    return reasons


@dataclass
class _Pending:
    index: int
    result: AudioResult
    item: ScoreItem
    wav: Path


class AudioStage:
    """SIM / MOS of each row (a `loop.Stage`): its clip batched through every scorer, judged for
    `low_sim` / `low_mos` and retained when suspect. Results in manifest order."""

    read_seconds = MAX_CLIP_SECONDS

    def __init__(
        self, count: int, scorers: Sequence[Scorer], *, sim_threshold: float, mos_threshold: float,
        batch_size: int, retainer: Retainer | None, retention_meta: Mapping[str, Any],
        on_result: Callable[[AudioResult], None] | None,
    ):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.scorers = list(scorers)
        self.sim_threshold, self.mos_threshold, self.batch_size = sim_threshold, mos_threshold, batch_size
        self.retainer, self.retention_meta, self.on_result = retainer, dict(retention_meta), on_result
        self.slots: list[AudioResult | None] = [None] * count
        self.cpu = {s.metric: 0.0 for s in self.scorers}
        self.wall = {s.metric: 0.0 for s in self.scorers}
        self._pending: list[_Pending] = []

    def add(self, index: int, row: ManifestRow, audio: DecodeOnce) -> None:
        reference = row.prompt_wav
        result = AudioResult(utt=row.utt, ref=row.text, status=EvalStatus.MISSING,
                             reference=str(reference) if reference else None)
        read = audio()
        if read.clip is None:
            result.status, result.error = read.status, read.error
            self._done(index, result, None, audio.wav)
            return
        clip = read.clip.cut(MAX_CLIP_SECONDS)
        result.status, result.audio_s, result.notes = EvalStatus.OK, clip.duration_s, list(clip.notes)
        item = ScoreItem(row.utt, clip.pcm, Path(reference) if reference else None)
        self._pending.append(_Pending(index, result, item, audio.wav))
        if len(self._pending) >= self.batch_size:
            self.finish()

    def finish(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        for scorer in self.scorers:
            _run_scorer(scorer, [(p.result, p.item) for p in batch], self.cpu, self.wall)
        for p in batch:
            self._done(p.index, p.result, p.item.clip, p.wav)

    def run(self, started_at: str, wall_seconds: float) -> AudioRun:
        return AudioRun(
            results=[r for r in self.slots if r is not None],
            scorers=[{"metric": s.metric, "keys": list(s.keys), **s.describe()} for s in self.scorers],
            cpu_seconds=self.cpu,
            wall_seconds=self.wall,
            started_at=started_at,
            wall_total=wall_seconds,
        )

    def _done(self, index: int, result: AudioResult, clip: np.ndarray | None, wav: Path) -> None:
        if result.status == EvalStatus.OK:
            result.reasons = _judge(result, self.sim_threshold, self.mos_threshold)
            if result.reasons and self.retainer is not None and clip is not None:
                meta = {
                    "utt": result.utt, "text": result.ref, "expected_text": result.ref,
                    "gen_wav": str(wav), "reference_wav": result.reference,
                    **result.values, "sim_threshold": self.sim_threshold, "mos_threshold": self.mos_threshold,
                    **self.retention_meta,
                }
                path = self.retainer.keep(clip, SAMPLE_RATE, result.reasons, meta)
                result.retained = str(path) if path else None
        self.slots[index] = result
        if self.on_result is not None:
            self.on_result(result)


def score_audio(
    rows: Sequence[ManifestRow],
    gen_dir: str | Path,
    scorers: Sequence[Scorer],
    *,
    sim_threshold: float = 0.75,
    mos_threshold: float = 3.0,
    batch_size: int = 8,
    retainer: Retainer | None = None,
    retention_meta: Mapping[str, Any] | None = None,
    on_result: Callable[[AudioResult], None] | None = None,
) -> AudioRun:
    """SIM / MOS of every manifest row alone (`omnicli.evaluation.pipeline.Evaluator` runs them beside WER)."""
    started_at = utc_now()
    t0 = time.perf_counter()
    stage = AudioStage(
        len(rows), scorers, sim_threshold=sim_threshold, mos_threshold=mos_threshold, batch_size=batch_size,
        retainer=retainer, retention_meta=retention_meta or {}, on_result=on_result,
    )
    score_rows(rows, Path(gen_dir), [stage])
    return stage.run(started_at, time.perf_counter() - t0)


def _timed(
    scorer: Scorer, items: list[ScoreItem], cpu: dict[str, float], wall: dict[str, float]
) -> tuple[list[dict[str, float]], float]:
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        values = scorer.score(items)
    finally:
        spent = time.process_time() - c0
        cpu[scorer.metric] += spent
        wall[scorer.metric] += time.perf_counter() - w0
    if len(values) != len(items):
        raise RuntimeError(f"{scorer.backend} returned {len(values)} results for {len(items)} clips")
    return values, spent


def _run_scorer(
    scorer: Scorer, batch: list[tuple[AudioResult, ScoreItem]], cpu: dict[str, float], wall: dict[str, float]
) -> None:
    """Scores one batch; if it fails, retries clip by clip so one bad clip (or reference) fails alone.
    A clip shorter than the scorer's `min_seconds` gets that reason instead of a score."""
    shortest = int(scorer.min_seconds * SAMPLE_RATE)
    too_short = [entry for entry in batch if entry[1].clip.shape[0] < shortest]
    batch = [entry for entry in batch if entry[1].clip.shape[0] >= shortest]
    for result, item in too_short:
        _record_error(result, scorer, f"clip is {item.clip.shape[0] / SAMPLE_RATE:.3f} s long; {scorer.backend} "
                      f"scores clips of at least {scorer.min_seconds:g} s")
    if not batch:
        return
    items = [item for _, item in batch]
    outcomes: list[tuple[dict[str, float] | None, Exception | None, float]]
    try:
        values, spent = _timed(scorer, items, cpu, wall)
        outcomes = [(v, None, spent / len(items)) for v in values]
    except Exception as batch_exc:
        if len(items) == 1:
            outcomes = [(None, batch_exc, 0.0)]
        else:
            log.debug("%s batch of %d failed (%s); retrying one by one", scorer.backend, len(items), batch_exc)
            outcomes = []
            for item in items:
                try:
                    (value,), spent = _timed(scorer, [item], cpu, wall)
                    outcomes.append((value, None, spent))
                except Exception as exc:
                    outcomes.append((None, exc, 0.0))
    for (result, _), (figures, error, spent) in zip(batch, outcomes, strict=True):
        if figures is None:
            _record_error(result, scorer, f"{type(error).__name__}: {error}")
            continue
        result.values.update(figures)
        result.cpu_s[scorer.metric] = round(result.cpu_s.get(scorer.metric, 0.0) + spent, 4)


def _record_error(result: AudioResult, scorer: Scorer, why: str) -> None:
    message = f"{scorer.backend}: {why}"
    previous = result.errors.get(scorer.metric)
    result.errors[scorer.metric] = f"{previous}; {message}" if previous else message


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def _median(values: list[float]) -> float | None:
    return round(float(statistics.median(values)), 4) if values else None


def _share_below(values: list[float], threshold: float) -> float | None:
    return round(100.0 * sum(1 for v in values if v < threshold) / len(values), 3) if values else None


def audio_summary(run: AudioRun, *, sim_threshold: float, mos_threshold: float) -> dict[str, Any]:
    """SIM and MOS summary keys, with which backend produced them and what they cost."""
    out: dict[str, Any] = {}
    ok = [r for r in run.results if r.status == EvalStatus.OK]
    by_metric: dict[str, list[dict[str, Any]]] = {d["metric"]: [] for d in run.scorers}
    for d in run.scorers:
        by_metric[d["metric"]].append(d)
    for metric, descriptions in by_metric.items():
        scored = [r for r in ok if metric not in r.errors]
        # Not scored for this metric, whatever the reason (no wav, unreadable, the scorer failed).
        failed = [r for r in run.results if r.status != EvalStatus.OK or metric in r.errors]
        cpu, wall = run.cpu_seconds.get(metric, 0.0), run.wall_seconds.get(metric, 0.0)
        if metric == "sim":
            sims = [r.values["sim"] for r in scored]
            out.update({
                "sim_mean": _mean(sims),
                "sim_median": _median(sims),
                "sim_share_below_threshold": _share_below(sims, sim_threshold),
                "sim_threshold": sim_threshold,
                "sim_backend": descriptions[0]["backend"],
                "sim_model": descriptions[0]["model"],
                "sim_note": descriptions[0]["comparable_to"],
            })
        else:
            keys = [k for d in descriptions for k in d["keys"]]
            for key in keys:
                values = [r.values[key] for r in scored if key in r.values]
                out[f"{key}_mean"] = _mean(values)
            overall = [v for r in scored if (v := r.values.get("dnsmos_ovrl", r.values.get("utmos"))) is not None]
            out.update({
                "dnsmos_ovrl_median": _median([r.values["dnsmos_ovrl"] for r in scored if "dnsmos_ovrl" in r.values])
                if "dnsmos_ovrl" in keys else None,
                "utmos_median": _median([r.values["utmos"] for r in scored if "utmos" in r.values])
                if "utmos" in keys else None,
                "mos_share_below_threshold": _share_below(overall, mos_threshold),
                "mos_threshold": mos_threshold,
                "mos_backends": [d["backend"] for d in descriptions],
                "mos_models": {d["backend"]: d["model"] for d in descriptions},
                "mos_notes": {d["backend"]: d["comparable_to"] for d in descriptions},
            })
        out.update({
            f"num_{metric}_scored": len(scored),
            f"num_{metric}_failed": len(failed),
            f"{metric}_failed": [
                {"utt": r.utt, "status": str(r.status), "error": r.errors.get(metric) or r.error} for r in failed
            ],
            f"{metric}_cpu_s_total": round(cpu, 3),
            f"{metric}_cpu_s_per_utt": round(cpu / len(ok), 4) if ok else None,
            f"{metric}_wall_s_per_utt": round(wall / len(ok), 4) if ok else None,
        })
    out["num_low_sim"] = sum(1 for r in run.results if Reason.LOW_SIM in r.reasons)
    out["num_low_mos"] = sum(1 for r in run.results if Reason.LOW_MOS in r.reasons)
    return out

