"""One evaluation as one object: every metric's rows joined per utterance, the summary, the files.

`EvalReport` is what `omnicli.evaluation.pipeline.Evaluator.score` returns.
`rows` holds one dict per manifest row (WER columns first when WER ran, then
the audio scores, then reasons/retained/error); `summary` the summary file's
content in its key order; `write(out_dir, files)` writes them atomically as
`omni eval`'s eval_results.tsv / .jsonl + eval_summary.json (`EVAL_FILES`) or
`omni eval-wer`'s wer_* names (`WER_FILES`), and seed-tts-eval's
wav_res_ref_text.wer whenever WER ran.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from omnicli.errors import EXIT_OK, EXIT_SOME_FAILED
from omnicli.evaluation.results import (
    RESULTS_JSONL,
    RESULTS_TSV,
    SUMMARY_JSON,
    EvalStatus,
    seed_wer_lines,
    write_result_files,
)
from omnicli.evaluation.results import TSV_COLUMNS as WER_COLUMNS
from omnicli.evaluation.scorers.score_folder import AudioRun
from omnicli.evaluation.summaries import SCHEMA_VERSION, EvalSummary
from omnicli.evaluation.wer_run import EvalRun, run_facts
from omnicli.retention import Retainer

_TAIL = ("notes", "reasons", "retained", "error")


@dataclass(frozen=True)
class ResultFiles:
    """The names one command gives its three result files."""

    tsv: str
    jsonl: str
    summary: str
    with_metrics: bool  # the summary lists its `metrics` (eval-wer's file never did: WER is all it holds)
    default_dir: str  # the commands' default --out, under GEN_DIR


EVAL_FILES = ResultFiles("eval_results.tsv", "eval_results.jsonl", "eval_summary.json", True, "eval")
WER_FILES = ResultFiles(RESULTS_TSV, RESULTS_JSONL, SUMMARY_JSON, False, "eval_wer")  # omni eval-wer's


@dataclass
class EvalOutcome:
    """What one pass over the rows produced: each metric family's run, when it ran."""

    wer_run: EvalRun | None
    audio_run: AudioRun | None
    wall_seconds: float
    started_at: str


@dataclass(frozen=True)
class RunContext:
    """What a summary records beside the figures: inputs, profile, retention."""

    manifest: Path | None = None
    profile_name: str | None = None
    profile_digest: str | None = None
    retainer: Retainer | None = None


def columns(outcome: EvalOutcome) -> tuple[str, ...]:
    """TSV columns: eval-wer's first when WER ran, then the audio scores, then reasons/retained/error."""
    head = [c for c in WER_COLUMNS if c not in _TAIL] if outcome.wer_run else ["utt", "ref", "status", "audio_s"]
    extra: list[str] = []
    if outcome.audio_run:
        metrics = list(dict.fromkeys(d["metric"] for d in outcome.audio_run.scorers))
        for d in outcome.audio_run.scorers:
            extra += d["keys"] + (["sim_backend", "reference"] if d["metric"] == "sim" else [])
        extra += [f"{m}_error" for m in metrics] + [f"{m}_cpu_s" for m in metrics]
    return tuple(head + extra + list(_TAIL))


def merge_rows(outcome: EvalOutcome) -> list[dict[str, Any]]:
    """One dict per manifest row, holding every column of `columns(outcome)`."""
    cols = columns(outcome)
    wer_rows = [r.to_dict() for r in outcome.wer_run.results] if outcome.wer_run else None
    audio_run = outcome.audio_run
    sim_backend = next((d["backend"] for d in audio_run.scorers if d["metric"] == "sim"), None) if audio_run else None
    count = len(wer_rows) if wer_rows is not None else len(audio_run.results) if audio_run else 0
    merged = []
    for i in range(count):
        row: dict[str, Any] = dict(wer_rows[i]) if wer_rows is not None else {}
        if audio_run is not None:
            a = audio_run.results[i]
            row.setdefault("utt", a.utt)
            row.setdefault("ref", a.ref)
            row.setdefault("status", str(a.status))
            if row.get("audio_s") is None:
                row["audio_s"] = round(a.audio_s, 4) if a.audio_s is not None else None
            row.update(a.values)
            if sim_backend:
                row["sim_backend"] = sim_backend
                row["reference"] = a.reference
            for metric in {d["metric"] for d in audio_run.scorers}:
                row[f"{metric}_error"] = a.errors.get(metric)
                row[f"{metric}_cpu_s"] = a.cpu_s.get(metric)
            reasons = list(row.get("reasons") or [])
            row["notes"] = list(dict.fromkeys([*(row.get("notes") or []), *a.notes]))
            row["reasons"] = reasons + [r for r in a.reasons if r not in reasons]
            row["retained"] = row.get("retained") or a.retained
            row["error"] = row.get("error") or a.error
        merged.append({c: row.get(c) for c in cols} | {k: v for k, v in row.items() if k not in cols})
    return merged


def build_eval_summary(
    outcome: EvalOutcome, *, metrics: Sequence[str], wer_summary: Mapping[str, Any] | None,
    audio_summary: Mapping[str, Any] | None, gen_dir: Path | None, context: RunContext,
) -> dict[str, Any]:
    """eval-wer's summary keys (when WER ran), the SIM/MOS keys, and the run's facts."""
    summary: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "metrics": list(metrics)}
    summary.update(wer_summary or {})
    summary.update(audio_summary or {})
    if outcome.audio_run is not None:
        notes = {utt: list(n) for utt, n in (summary.get("notes") or {}).items()}
        for r in outcome.audio_run.results:
            if r.notes:
                notes[r.utt] = list(dict.fromkeys([*notes.get(r.utt, []), *r.notes]))
        summary["notes"] = notes
    if outcome.audio_run is not None and wer_summary is None:
        results = outcome.audio_run.results
        missing = [r for r in results if r.status == EvalStatus.MISSING]
        failed = [r for r in results if r.status not in (EvalStatus.OK, EvalStatus.MISSING)]
        summary.update({
            "num_utts": len(results),
            "num_missing": len(missing),
            "num_failed": len(failed),
            "missing": [r.utt for r in missing],
            "failed": [{"utt": r.utt, "status": str(r.status), "error": r.error} for r in failed],
        })
    summary.update(run_facts(context.retainer, context.manifest, gen_dir, context.profile_name,
                             context.profile_digest, outcome.started_at, outcome.wall_seconds))
    return summary


@dataclass
class EvalReport:
    """One evaluation's results: the outcome of each metric, the summary (file content, in order) and its rows."""

    outcome: EvalOutcome
    summary: dict[str, Any]

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self.summary["metrics"])

    @property
    def columns(self) -> tuple[str, ...]:
        return columns(self.outcome)

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        return merge_rows(self.outcome)

    @property
    def model(self) -> EvalSummary:
        """The summary as its typed model (validated)."""
        return EvalSummary.model_validate(self.summary)

    def all_scored(self) -> bool:
        """True when no utterance is missing or failed, and no SIM/MOS scorer failed on any."""
        s = self.summary
        return not (s.get("num_missing") or s.get("num_failed") or s.get("num_sim_failed") or s.get("num_mos_failed"))

    @property
    def exit_code(self) -> int:
        """0 when every utterance was scored, 1 when some were missing or failed (errors.py)."""
        return EXIT_OK if self.all_scored() else EXIT_SOME_FAILED

    def file_summary(self, files: ResultFiles = EVAL_FILES) -> dict[str, Any]:
        """The summary as `files` holds it (eval-wer's has no `metrics` key)."""
        if files.with_metrics:
            return self.summary
        if self.metrics != ("wer",):
            raise ValueError(f"{files.summary} holds WER only; this evaluation ran {','.join(self.metrics)}")
        return {k: v for k, v in self.summary.items() if k != "metrics"}

    def write(self, out_dir: str | os.PathLike, files: ResultFiles = EVAL_FILES) -> dict[str, Path]:
        """The results, the summary and, when WER ran, seed-tts-eval's score file (same as eval-wer's)."""
        wer_run = self.outcome.wer_run
        seed = seed_wer_lines(wer_run.results, self.summary.get("gen_dir") or ".") if wer_run is not None else None
        names = (files.tsv, files.jsonl, files.summary)
        return write_result_files(out_dir, names, self.columns, self.rows, self.file_summary(files), seed)
