"""Per-utterance results of eval-wer and the files they are written to."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.atomic import write_json_atomic, write_text_atomic
from omnicli.evaluation.summaries import EvalSummary
from omnicli.evaluation.wer import UttScore


class EvalStatus(str, Enum):
    """Status of one utterance. OK and ASR_EMPTY are scored (an empty transcript is
    WER 1.0, as seed-tts-eval scores it); the failures are not. Str-valued: the
    files hold the plain values."""

    OK = "ok"
    MISSING = "missing"  # no GEN/<utt>.wav (or, with --transcripts, no transcript)
    EMPTY_AUDIO = "empty_audio"  # the wav holds no samples
    UNREADABLE = "unreadable"  # the wav cannot be decoded
    ASR_ERROR = "asr_error"  # the ASR backend raised on this clip
    ASR_EMPTY = "asr_empty"  # the transcript has no words after normalisation: scored as WER 1.0
    EMPTY_REFERENCE = "empty_reference"  # the manifest text has no words after normalisation

    def __str__(self) -> str:
        return self.value


# Tuples, not sets: Enum hashes by name, so a plain "asr_error" read from a file
# would miss a set of members; tuple membership compares by value.
SCORED_STATUSES = (EvalStatus.OK, EvalStatus.ASR_EMPTY)
FAILED_STATUSES = (EvalStatus.EMPTY_AUDIO, EvalStatus.UNREADABLE, EvalStatus.ASR_ERROR, EvalStatus.EMPTY_REFERENCE)
# Rows with these statuses never got a transcript (hyp is null / empty in the TSV).
NO_TRANSCRIPT_STATUSES = (EvalStatus.MISSING, EvalStatus.EMPTY_AUDIO, EvalStatus.UNREADABLE, EvalStatus.ASR_ERROR)

RESULTS_TSV = "wer_results.tsv"
# seed-tts-eval's score file (cal_wer.sh's `wav_res_ref_text.wer`), read by its average_wer.py.
SEED_WER_FILE = "wav_res_ref_text.wer"
RESULTS_JSONL = "wer_results.jsonl"
SUMMARY_JSON = "wer_summary.json"

# The seed-tts-eval columns first, then ours.
TSV_COLUMNS = (
    "utt", "wer", "ref", "hyp", "ins", "del", "sub", "status",
    "ref_norm", "hyp_norm", "ref_words", "audio_s", "over_30s", "truncated", "asr_s", "notes", "reasons", "retained",
    "error",
)


@dataclass
class WerResult:
    """One utterance of eval-wer: its status, transcript and scores (a row of the result files)."""

    utt: str
    ref: str
    status: EvalStatus
    hyp: str | None = None
    wer: float | None = None
    ins: float | None = None
    dele: float | None = None
    sub: float | None = None
    substitutions: int | None = None
    deletions: int | None = None
    insertions: int | None = None
    ref_words: int | None = None
    ref_norm: str | None = None
    hyp_norm: str | None = None
    audio_s: float | None = None  # duration of the generated audio
    over_30s: bool = False  # longer than Whisper's 30 s window
    truncated: bool = False  # cut to the first 30 s before ASR (what the backend saw)
    asr_s: float | None = None  # ASR wall time, the batch's time shared evenly
    notes: list[str] = field(default_factory=list)  # what the scores cannot show (omnicli.evaluation.clips)
    reasons: list[str] = field(default_factory=list)  # retention reasons (asr_mismatch, asr_empty)
    retained: str | None = None  # path of the retained wav, when retention is on
    error: str | None = None
    score: UttScore | None = field(default=None, repr=False)  # set when scored (also for asr_empty)

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """JSON row; keys in TSV order (`del` spelled out as in seed-tts-eval)."""
        values = {
            "utt": self.utt, "wer": self.wer, "ref": self.ref, "hyp": self.hyp, "ins": self.ins,
            "del": self.dele, "sub": self.sub, "status": EvalStatus(self.status).value, "ref_norm": self.ref_norm,
            "hyp_norm": self.hyp_norm, "ref_words": self.ref_words, "audio_s": self.audio_s,
            "over_30s": self.over_30s, "truncated": self.truncated, "asr_s": self.asr_s,
            "notes": list(self.notes), "reasons": list(self.reasons), "retained": self.retained, "error": self.error,
        }
        values.update(substitutions=self.substitutions, deletions=self.deletions, insertions=self.insertions)
        return values


def tsv_cell(value: object) -> str:
    """One TSV cell: empty for None, true/false, lists comma-joined; tabs and line breaks become spaces."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        value = ",".join(map(str, value))
    # One row per line: tabs and line breaks inside texts become spaces (the JSONL keeps them).
    return str(value).replace("\t", " ").replace("\r", " ").replace("\n", " ")


def _seed_cell(text: str) -> str:
    # The raw text, as run_wer.py writes it; only a tab or line break (which would break
    # average_wer.py's split into 7 fields per line) becomes a space.
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


# The first line average_wer.py writes into the score file.
SEED_WER_HEADER = "\t".join(
    ("utt", "wav_res", "res_wer", "text_ref", "text_res", "res_wer_ins", "res_wer_del", "res_wer_sub")) + "\n"


def seed_mean_pct(values: Iterable[float]) -> float:
    """average_wer.py's `round(np.mean(values) * 100, 3)`: numpy's mean and numpy's rounding
    (which differs from Python's round() in ties)."""
    return float(round(np.mean(list(values)) * 100, 3))


def seed_wer_lines(results: Iterable[WerResult], gen_dir: str | os.PathLike) -> str:
    """seed-tts-eval's score file as cal_wer.sh leaves it (`wav_res_ref_text.wer`, written by
    average_wer.py): its header line, one line per scored utterance as run_wer.py writes it,
    `wav_path<TAB>wer<TAB>ref<TAB>hyp<TAB>ins<TAB>del<TAB>sub` (ratios as fractions, raw
    texts, the wav path `os.path.join(gen_dir, utt + ".wav")` as get_wav_res_ref_text.py
    builds it), then the `WER: X%` line.

    Only scored utterances are listed: seed-tts-eval's run_wer.py skips missing
    wavs (and stops on the other failures); empty transcripts are listed at
    WER 1.0, so `WER:` equals `seed_wer_mean`.
    """
    scored = [r for r in results if r.scored]
    body = SEED_WER_HEADER + "".join(
        f"{os.path.join(os.fspath(gen_dir), r.utt + '.wav')}\t{_ratio(r.wer)}\t{_seed_cell(r.ref)}"
        f"\t{_seed_cell(r.hyp or '')}\t{_ratio(r.ins)}\t{_ratio(r.dele)}\t{_ratio(r.sub)}\n"
        for r in scored
    )
    if scored:
        body += f"WER: {seed_mean_pct(_ratio(r.wer) for r in scored)}%\n"
    return body


def _ratio(value: float | None) -> float:
    if value is None:
        raise ValueError("a scored utterance has no WER figures")  # set together with the status
    return float(value)


def write_result_files(
    out_dir: str | os.PathLike, names: tuple[str, str, str], columns: Sequence[str], rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any], seed_lines: str | None,
) -> dict[str, Path]:
    """The (tsv, jsonl, summary) files `names` atomically, then seed-tts-eval's score file when given."""
    out = Path(out_dir)
    tsv = "\t".join(columns) + "\n" + "".join("\t".join(tsv_cell(row.get(c)) for c in columns) + "\n" for row in rows)
    jsonl = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    EvalSummary.model_validate(summary)  # one definition of the file: a drift fails here, not downstream
    tsv_name, jsonl_name, summary_name = names
    paths = {
        "tsv": write_text_atomic(out / tsv_name, tsv),
        "jsonl": write_text_atomic(out / jsonl_name, jsonl),
        "summary": write_json_atomic(out / summary_name, dict(summary)),
    }
    if seed_lines is not None:
        paths["seed_wer"] = write_text_atomic(out / SEED_WER_FILE, seed_lines)
    return paths


def write_results(
    out_dir: str | os.PathLike, results: Iterable[WerResult], summary: Mapping[str, Any],
    gen_dir: str | os.PathLike | None = None,
) -> dict[str, Path]:
    """Writes wer_results.tsv, wer_results.jsonl, wer_summary.json and
    seed-tts-eval's wav_res_ref_text.wer atomically (wav paths under `gen_dir`,
    default the summary's `gen_dir`)."""
    results = list(results)
    seed = seed_wer_lines(results, gen_dir or summary.get("gen_dir") or ".")
    names = (RESULTS_TSV, RESULTS_JSONL, SUMMARY_JSON)
    return write_result_files(out_dir, names, TSV_COLUMNS, [r.to_dict() for r in results], summary, seed)
