"""WER of a folder of generated speech against a manifest (docs/metrics.md, "WER").

`WerStage` transcribes each row's clip (or takes its cached transcript),
scores it, retains suspect ASR inputs and keeps one `WerResult` per row in
manifest order; `evaluate` runs it alone over a folder and
`build_wer_summary` turns the results into the summary keys. Every row ends
with a status: nothing is silently skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from omnicli import __version__
from omnicli.evaluation.asr.base import SAMPLE_RATE, WINDOW_S, AsrBackend
from omnicli.evaluation.clips import MAX_CLIP_SECONDS, Clip, load_clip
from omnicli.evaluation.loop import DecodeOnce, score_rows
from omnicli.evaluation.normalize import normalize_text
from omnicli.evaluation.results import EvalStatus, WerResult
from omnicli.evaluation.summaries import SCHEMA_VERSION
from omnicli.evaluation.wer import HIGH_WER, aggregate, mean_counting_failures, score_utterance
from omnicli.manifest import ManifestRow
from omnicli.retention import Reason, Retainer
from omnicli.runtime.clock import utc_now

log = logging.getLogger(__name__)

# What each summary figure is, so nobody mistakes an extra for the published number.
KEY_NOTES = {
    "seed_wer_mean": "mean per-utterance WER x 100, empty transcripts counted as 100%: "
    "the number Seed-TTS-eval tables publish",
    "wer_mean_below_50": "mean WER over utterances with WER <= 50% "
    "(computed by seed-tts-eval's average_wer.py, not published)",
    "sub": "mean substitution rate x 100 (computed by seed-tts-eval, not published)",
    "del": "mean deletion rate x 100 (computed by seed-tts-eval, not published)",
    "ins": "mean insertion rate x 100 (computed by seed-tts-eval, not published)",
    "corpus_wer": "extra, not in published tables: total errors / total reference words x 100",
    "median_wer": "extra, not in published tables: median per-utterance WER x 100",
    "share_wer_above_50": "extra, not in published tables: percent of scored utterances with WER > 50%",
    "wer_mean_failed_as_100": "extra, not in published tables: mean WER with each failed utterance counted as 100%",
}


@dataclass
class EvalRun:
    results: list[WerResult]
    asr_seconds: float  # time spent inside the ASR backend
    wall_seconds: float
    started_at: str


@dataclass
class _Pending:
    index: int
    result: WerResult
    clip: np.ndarray  # the exact ASR input: 16 kHz mono, cut to 30 s when the backend needs it
    audio: DecodeOnce


def load_asr_input(path: Path, truncate: bool) -> Clip:
    """The ASR input: 16 kHz mono, cut to Whisper's 30 s window when `truncate`, else to
    MAX_CLIP_SECONDS (memory stays bounded for any file). Raises AudioError."""
    return load_clip(path, path.parent, max_seconds=WINDOW_S if truncate else MAX_CLIP_SECONDS)


class WerStage:
    """WER of each row (a `loop.Stage`): its clip batched through the ASR backend, or its cached
    transcript, scored; suspect ASR inputs retained. Results in manifest order."""

    def __init__(
        self, count: int, *, lang: str, backend: AsrBackend | None, transcripts: Mapping[str, str] | None,
        threshold: float, batch_size: int, retainer: Retainer | None, retention_meta: Mapping[str, Any],
        on_result: Callable[[WerResult], None] | None,
    ):
        if (backend is None) == (transcripts is None):
            raise ValueError("give exactly one of backend= and transcripts=")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.lang, self.backend, self.transcripts = lang, backend, transcripts
        self.threshold, self.batch_size = threshold, batch_size
        self.retainer, self.retention_meta, self.on_result = retainer, dict(retention_meta), on_result
        self.slots: list[WerResult | None] = [None] * count
        self.asr_seconds = 0.0
        self._pending: list[_Pending] = []

    @property
    def read_seconds(self) -> float:
        if self.backend is not None and self.backend.truncates_to_window:
            return WINDOW_S
        return MAX_CLIP_SECONDS  # a backend without a window, or the clip retained beside a cached transcript

    @property
    def results(self) -> list[WerResult]:
        return [r for r in self.slots if r is not None]

    def add(self, index: int, row: ManifestRow, audio: DecodeOnce) -> None:
        result = WerResult(utt=row.utt, ref=row.text, status=EvalStatus.MISSING)
        if not normalize_text(row.text, self.lang).split():
            result.status = EvalStatus.EMPTY_REFERENCE
            result.error = "reference has no words after normalisation"
        elif self.transcripts is not None:
            if row.utt not in self.transcripts:
                result.error = "no transcript in the transcripts file"
            else:
                self._score(result, self.transcripts[row.utt], None, audio)
        elif self.backend is not None:
            read = audio()
            if read.clip is None:
                result.status, result.error = read.status, read.error
            else:
                clip = read.clip.cut(self.read_seconds)
                result.audio_s, result.truncated, result.notes = clip.duration_s, clip.truncated, list(clip.notes)
                result.over_30s = result.audio_s > WINDOW_S
                self._pending.append(_Pending(index, result, clip.pcm, audio))
                if len(self._pending) >= self.batch_size:
                    self.finish()
                return
        self._done(index, result)

    def finish(self) -> None:
        """Transcribes the pending batch; if it fails, retries clip by clip so one bad clip fails alone."""
        batch, self._pending = self._pending, []
        if not batch or self.backend is None:
            return
        outcomes: list[tuple[str | None, Exception | None, float | None]]
        try:
            texts, elapsed = self._transcribe([p.clip for p in batch])
            outcomes = [(text, None, elapsed / len(batch)) for text in texts]
        except Exception as batch_exc:
            if len(batch) == 1:
                outcomes = [(None, batch_exc, None)]
            else:
                log.warning("ASR batch of %d failed (%s); retrying one by one", len(batch), batch_exc)
                outcomes = []
                for p in batch:
                    try:
                        (text,), elapsed = self._transcribe([p.clip])
                        outcomes.append((text, None, elapsed))
                    except Exception as exc:
                        outcomes.append((None, exc, None))
        for p, (hyp, error, asr_s) in zip(batch, outcomes, strict=True):
            p.result.asr_s = round(asr_s, 4) if asr_s is not None else None
            if hyp is None:
                p.result.status = EvalStatus.ASR_ERROR
                p.result.error = f"ASR failed: {type(error).__name__}: {error}"
            else:
                self._score(p.result, hyp, p.clip, p.audio)
            self._done(p.index, p.result)

    def _transcribe(self, clips: list[np.ndarray]) -> tuple[list[str], float]:
        assert self.backend is not None
        t0 = time.perf_counter()
        try:
            texts = self.backend.transcribe(clips)
        finally:
            elapsed = time.perf_counter() - t0
            self.asr_seconds += elapsed
        if len(texts) != len(clips):
            raise RuntimeError(f"ASR returned {len(texts)} transcripts for {len(clips)} clips")
        return texts, elapsed

    def run(self, started_at: str, wall_seconds: float) -> EvalRun:
        return EvalRun(self.results, self.asr_seconds, wall_seconds, started_at)

    def _done(self, index: int, result: WerResult) -> None:
        self.slots[index] = result
        if self.on_result is not None:
            self.on_result(result)

    def _score(self, result: WerResult, hyp: str, clip: np.ndarray | None, audio: DecodeOnce) -> None:
        """Scores one transcript and retains the ASR input when it is suspect."""
        result.hyp = hyp
        score = score_utterance(result.ref, hyp, self.lang)
        result.score = score
        result.wer, result.sub, result.dele, result.ins = score.wer, score.sub, score.dele, score.ins
        result.substitutions, result.deletions = score.substitutions, score.deletions
        result.insertions = score.insertions
        result.ref_words, result.ref_norm, result.hyp_norm = score.ref_words, score.ref_norm, score.hyp_norm
        if not score.hyp_norm.split():
            # Scored (WER 1.0 against a non-empty reference) as seed-tts-eval does, so
            # silence cannot flatter seed_wer_mean; the status tells it apart.
            result.status = EvalStatus.ASR_EMPTY
            result.reasons = [Reason.ASR_EMPTY]
        else:
            result.status = EvalStatus.OK
            if score.wer > self.threshold:
                result.reasons = [Reason.ASR_MISMATCH]
        if result.reasons and self.retainer is not None:
            if clip is None:  # cached transcripts: the generated wav at 16 kHz stands in
                read = audio()
                if read.clip is None:
                    log.warning("%s: not retained, audio unavailable (%s)", result.utt, read.error)
                    return
                clip = read.clip.cut(MAX_CLIP_SECONDS).pcm
            self._retain(result, clip, audio.wav)

    def _retain(self, result: WerResult, clip: np.ndarray, wav: Path) -> None:
        assert self.retainer is not None
        meta = {
            "utt": result.utt,
            "text": result.ref,
            "reference": result.ref,
            "expected_text": result.ref,
            "transcript": result.hyp,
            "ref_norm": result.ref_norm,
            "hyp_norm": result.hyp_norm,
            "wer": result.wer,
            "wer_threshold": self.threshold,
            "language": self.lang,
            "gen_wav": str(wav),
            "audio_s": result.audio_s,
            "truncated_to_30s": result.truncated,
            "asr_s": result.asr_s,
            **self.retention_meta,
        }
        path = self.retainer.keep(clip, SAMPLE_RATE, result.reasons, meta)
        result.retained = str(path) if path else None


def evaluate(
    rows: Sequence[ManifestRow],
    gen_dir: str | Path,
    *,
    lang: str = "en",
    backend: AsrBackend | None = None,
    transcripts: Mapping[str, str] | None = None,
    threshold: float = 0.5,
    batch_size: int = 8,
    retainer: Retainer | None = None,
    retention_meta: Mapping[str, Any] | None = None,
    on_result: Callable[[WerResult], None] | None = None,
) -> EvalRun:
    """WER of every manifest row alone (`omnicli.evaluation.pipeline.Evaluator` runs it beside SIM / MOS).

    Exactly one of `backend` (transcribe GEN/<utt>.wav) and `transcripts`
    ({utt: hyp}, re-score only) must be given. `retention_meta` is added to
    each retained file's JSON (e.g. profile_digest, ASR backend and model).
    """
    started_at = utc_now()
    t0 = time.perf_counter()
    stage = WerStage(
        len(rows), lang=lang, backend=backend, transcripts=transcripts, threshold=threshold, batch_size=batch_size,
        retainer=retainer, retention_meta=retention_meta or {}, on_result=on_result,
    )
    score_rows(rows, Path(gen_dir), [stage])
    return stage.run(started_at, time.perf_counter() - t0)


def run_facts(
    retainer: Retainer | None, manifest: str | Path | None, gen_dir: str | Path | None,
    profile_name: str | None, profile_digest: str | None, started_at: str, wall_seconds: float,
) -> dict[str, Any]:
    """The summary keys every evaluation run records about itself (eval-wer and eval alike)."""
    return {
        "keep_failed": str(retainer.directory) if retainer else None,
        "num_retained": retainer.kept if retainer else 0,
        "retention_errors": retainer.errors if retainer else 0,
        "manifest": str(manifest) if manifest else None,
        "gen_dir": str(gen_dir) if gen_dir else None,
        "profile": profile_name,
        "profile_digest": profile_digest,
        "omni_version": __version__,
        "started_at": started_at,
        "wall_s": round(wall_seconds, 3),
    }


def build_wer_summary(
    run: EvalRun,
    *,
    lang: str,
    threshold: float,
    asr: Mapping[str, Any] | None,
    manifest: str | Path | None = None,
    gen_dir: str | Path | None = None,
    transcripts_file: str | Path | None = None,
    profile_name: str | None = None,
    profile_digest: str | None = None,
    retainer: Retainer | None = None,
) -> dict[str, Any]:
    """The summary JSON (wer_summary.json): the keys of docs/metrics.md plus how the numbers were obtained."""
    results = run.results
    scored = [r for r in results if r.scored]
    failed = [r for r in results if r.failed]
    missing = [r for r in results if r.status == EvalStatus.MISSING]
    metrics = aggregate(r.score for r in scored if r.score is not None)  # every scored row has its score
    transcribed = [r for r in results if r.asr_s is not None]
    return {
        "schema_version": SCHEMA_VERSION,
        **metrics,
        "wer_mean_failed_as_100": mean_counting_failures([r.wer for r in scored if r.wer is not None], len(failed)),
        "num_utts": len(results),
        "num_scored": len(scored),
        "num_missing": len(missing),
        "num_failed": len(failed),
        "num_empty_transcripts": sum(1 for r in results if r.status == EvalStatus.ASR_EMPTY),
        "missing": [r.utt for r in missing],
        "failed": [{"utt": r.utt, "status": EvalStatus(r.status).value, "error": r.error} for r in failed],
        "num_above_threshold": sum(1 for r in scored if r.wer is not None and r.wer > threshold),
        "num_over_30s": sum(1 for r in results if r.over_30s),
        "num_truncated": sum(1 for r in results if r.truncated),
        "notes": {r.utt: list(r.notes) for r in results if r.notes},
        "key_notes": KEY_NOTES,
        "units": "percent (x 100, rounded to 3 decimals) for every WER figure; per-utterance rows hold fractions",
        "high_wer_cut": HIGH_WER,
        "language": lang,
        "asr": dict(asr) if asr else None,
        "transcripts_file": str(transcripts_file) if transcripts_file else None,
        "wer_threshold": threshold,
        **run_facts(retainer, manifest, gen_dir, profile_name, profile_digest, run.started_at, run.wall_seconds),
        "asr_s_total": round(run.asr_seconds, 3),
        "asr_s_per_utt": round(run.asr_seconds / len(transcribed), 4) if transcribed else None,
    }
