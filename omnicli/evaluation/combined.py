"""`omni eval`: WER, speaker similarity and MOS of one folder, in one table.

`run_eval` runs the chosen metrics over the manifest rows (WER through
`evaluate`, SIM/MOS through the scorers), `merge_rows` joins them into one
row per utterance and `build_eval_summary` into one summary; `write_eval_results`
writes eval_results.tsv / .jsonl and eval_summary.json atomically.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from omnicli.atomic import write_json_atomic, write_text_atomic
from omnicli.evaluation.results import SEED_WER_FILE, EvalStatus, seed_wer_lines, tsv_cell
from omnicli.evaluation.results import TSV_COLUMNS as WER_COLUMNS
from omnicli.evaluation.runner import run_facts
from omnicli.evaluation.scorers.base import Scorer
from omnicli.evaluation.summaries import EvalSummary

METRICS = ("wer", "sim", "mos")
RESULTS_TSV = "eval_results.tsv"
RESULTS_JSONL = "eval_results.jsonl"
SUMMARY_JSON = "eval_summary.json"
_TAIL = ("notes", "reasons", "retained", "error")


def parse_metrics(text: str) -> tuple[str, ...]:
    """`wer,sim,mos` (any subset, any order) -> the chosen metrics in canonical order."""
    chosen = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(chosen - set(METRICS))
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)} (expected a subset of {','.join(METRICS)})")
    if not chosen:
        raise ValueError(f"no metric named (expected a subset of {','.join(METRICS)})")
    return tuple(m for m in METRICS if m in chosen)


@dataclass
class EvalPlan:
    metrics: tuple[str, ...]
    lang: str = "en"
    asr: object | None = None  # a loaded AsrBackend, when "wer" runs ASR
    transcripts: Mapping[str, str] | None = None  # cached transcripts instead of ASR
    scorers: list[Scorer] = field(default_factory=list)  # loaded SIM / MOS scorers
    wer_threshold: float = 0.5
    sim_threshold: float = 0.75
    mos_threshold: float = 3.0
    batch_size: int = 8
    retainer: object | None = None
    retention_meta: Mapping = field(default_factory=dict)


@dataclass
class EvalOutcome:
    wer_run: object | None  # evaluation.runner.EvalRun
    audio_run: object | None  # scorers.score_folder.AudioRun
    wall_seconds: float
    started_at: str


def run_eval(
    rows: Sequence, gen_dir: str | Path, plan: EvalPlan, *,
    on_wer: Callable | None = None, on_audio: Callable | None = None,
) -> EvalOutcome:
    from omnicli.evaluation.runner import evaluate
    from omnicli.evaluation.scorers.score_folder import score_audio

    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    wer_run = audio_run = None
    if "wer" in plan.metrics:
        wer_run = evaluate(
            rows, gen_dir, lang=plan.lang, backend=plan.asr, transcripts=plan.transcripts,
            threshold=plan.wer_threshold, batch_size=plan.batch_size, retainer=plan.retainer,
            retention_meta=plan.retention_meta, on_result=on_wer,
        )
    if plan.scorers:
        audio_run = score_audio(
            rows, gen_dir, plan.scorers, sim_threshold=plan.sim_threshold, mos_threshold=plan.mos_threshold,
            batch_size=plan.batch_size, retainer=plan.retainer, retention_meta=plan.retention_meta,
            on_result=on_audio,
        )
    return EvalOutcome(wer_run, audio_run, time.perf_counter() - t0, started_at)


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


def merge_rows(outcome: EvalOutcome) -> list[dict]:
    """One dict per manifest row, holding every column of `columns(outcome)`."""
    cols = columns(outcome)
    wer_rows = [r.to_dict() for r in outcome.wer_run.results] if outcome.wer_run else None
    audio = outcome.audio_run.results if outcome.audio_run else None
    sim_backend = next((d["backend"] for d in outcome.audio_run.scorers if d["metric"] == "sim"), None) if audio else None
    count = len(wer_rows) if wer_rows is not None else len(audio)
    merged = []
    for i in range(count):
        row = dict(wer_rows[i]) if wer_rows is not None else {}
        if audio is not None:
            a = audio[i]
            row.setdefault("utt", a.utt)
            row.setdefault("ref", a.ref)
            row.setdefault("status", str(a.status))
            if row.get("audio_s") is None:
                row["audio_s"] = round(a.audio_s, 4) if a.audio_s is not None else None
            row.update(a.values)
            if sim_backend:
                row["sim_backend"] = sim_backend
                row["reference"] = a.reference
            for metric in {d["metric"] for d in outcome.audio_run.scorers}:
                row[f"{metric}_error"] = a.errors.get(metric)
                row[f"{metric}_cpu_s"] = a.cpu_s.get(metric)
            row["notes"] = list(dict.fromkeys([*(row.get("notes") or []), *a.notes]))
            row["reasons"] = list(row.get("reasons") or []) + [r for r in a.reasons if r not in (row.get("reasons") or [])]
            row["retained"] = row.get("retained") or a.retained
            row["error"] = row.get("error") or a.error
        merged.append({c: row.get(c) for c in cols} | {k: v for k, v in row.items() if k not in cols})
    return merged


def build_eval_summary(
    outcome: EvalOutcome, *, metrics: Sequence[str], wer_summary: Mapping | None, audio_summary: Mapping | None,
    manifest: str | Path | None = None, gen_dir: str | Path | None = None,
    profile_name: str | None = None, profile_digest: str | None = None, retainer=None,
) -> dict:
    """eval-wer's summary keys (when WER ran), the SIM/MOS keys, and the run's facts."""
    summary: dict = {"metrics": list(metrics)}
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
    summary.update(run_facts(retainer, manifest, gen_dir, profile_name, profile_digest, outcome.started_at, outcome.wall_seconds))
    return summary


def all_scored(summary: Mapping) -> bool:
    """True when no utterance is missing or failed, and no SIM/MOS scorer failed on any."""
    return not (
        summary.get("num_missing") or summary.get("num_failed")
        or summary.get("num_sim_failed") or summary.get("num_mos_failed")
    )


def write_eval_results(
    out_dir: str | os.PathLike, rows: Sequence[dict], cols: Sequence[str], summary: dict, outcome: EvalOutcome | None = None,
) -> dict[str, Path]:
    """eval_results.tsv / .jsonl, eval_summary.json and, when WER ran (`outcome.wer_run`),
    seed-tts-eval's wav_res_ref_text.wer, the same file `omni eval-wer` writes."""
    out = Path(out_dir)
    tsv = "\t".join(cols) + "\n" + "".join("\t".join(tsv_cell(row.get(c)) for c in cols) + "\n" for row in rows)
    jsonl = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    EvalSummary.model_validate(summary)  # one definition of the file: a drift fails here, not downstream
    paths = {
        "tsv": write_text_atomic(out / RESULTS_TSV, tsv),
        "jsonl": write_text_atomic(out / RESULTS_JSONL, jsonl),
        "summary": write_json_atomic(out / SUMMARY_JSON, summary),
    }
    if outcome is not None and outcome.wer_run is not None:
        lines = seed_wer_lines(outcome.wer_run.results, summary.get("gen_dir") or ".")
        paths["seed_wer"] = write_text_atomic(out / SEED_WER_FILE, lines)
    return paths
