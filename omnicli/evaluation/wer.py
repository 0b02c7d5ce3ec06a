"""Per-utterance WER and the Seed-TTS-eval aggregates (docs/metrics.md, "WER")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import jiwer
import numpy as np

from omnicli.evaluation.normalize import normalize_text

# Per-utterance WER above this counts in share_wer_above_50 and is left out of
# wer_mean_below_50 (seed-tts-eval's average_wer.py: `wer > 0.5`).
HIGH_WER = 0.5


class EmptyReference(ValueError):
    """The reference has no words once normalised: WER is undefined."""


@dataclass(frozen=True)
class UttScore:
    """One utterance scored. Ratios are fractions (0.25 = 25 %)."""

    wer: float
    sub: float  # substitutions / reference length (seed-tts-eval's definition, see `score_utterance`)
    dele: float
    ins: float
    substitutions: int
    deletions: int
    insertions: int
    hits: int
    ref_words: int  # jiwer's reference word count (hits + substitutions + deletions)
    ref_norm: str
    hyp_norm: str

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    def to_dict(self) -> dict:
        return asdict(self)


def score_utterance(reference: str, hypothesis: str, lang: str) -> UttScore:
    """Normalises both texts and scores them with `jiwer.process_words`.

    As in seed-tts-eval, `sub`, `dele` and `ins` are divided by
    `len(ref_norm.split(" "))`. That equals jiwer's word count except when the
    normalised reference keeps a leading, trailing or repeated space (e.g.
    "a - - b"); the original script's denominator is kept so per-utterance
    ratios match it exactly. `corpus_wer` uses jiwer's count.

    Raises EmptyReference when the normalised reference has no words: the
    original script crashed there; callers record the utterance as failed.
    """
    ref_norm = normalize_text(reference, lang)
    hyp_norm = normalize_text(hypothesis, lang)
    if not ref_norm.split():
        raise EmptyReference(f"reference {reference!r} has no words after normalisation")
    out = jiwer.process_words(ref_norm, hyp_norm)
    seed_ref_len = len(ref_norm.split(" "))
    return UttScore(
        wer=float(out.wer),
        sub=out.substitutions / seed_ref_len,
        dele=out.deletions / seed_ref_len,
        ins=out.insertions / seed_ref_len,
        substitutions=int(out.substitutions),
        deletions=int(out.deletions),
        insertions=int(out.insertions),
        hits=int(out.hits),
        ref_words=int(out.hits + out.substitutions + out.deletions),
        ref_norm=ref_norm,
        hyp_norm=hyp_norm,
    )


def _pct(value: float | np.floating[Any]) -> float:
    # numpy's rounding, as seed-tts-eval's average_wer.py rounds (Python's round() differs in ties)
    return float(round(np.float64(value) * 100.0, 3))


def aggregate(scores: Iterable[UttScore]) -> dict:
    """The docs/metrics.md aggregates over scored utterances, all in percent (x 100, 3 decimals).

    - seed_wer_mean: mean per-utterance WER (what published tables report)
    - corpus_wer: total errors / total reference words
    - median_wer, share_wer_above_50 (percent of utterances with WER > 0.5),
      wer_mean_below_50 (mean over WER <= 0.5), sub, del, ins (means)
    Every value is None when nothing was scored.
    """
    scores = list(scores)
    keys = ("seed_wer_mean", "corpus_wer", "median_wer", "share_wer_above_50", "wer_mean_below_50", "sub", "del", "ins")
    if not scores:
        return {key: None for key in keys}
    wers = np.array([s.wer for s in scores], dtype=np.float64)
    below = wers[wers <= HIGH_WER]
    total_ref = sum(s.ref_words for s in scores)
    return {
        "seed_wer_mean": _pct(np.mean(wers)),
        "corpus_wer": _pct(sum(s.errors for s in scores) / total_ref),
        "median_wer": _pct(np.median(wers)),
        "share_wer_above_50": _pct(np.mean(wers > HIGH_WER)),
        "wer_mean_below_50": _pct(np.mean(below)) if below.size else None,
        "sub": _pct(np.mean([s.sub for s in scores])),
        "del": _pct(np.mean([s.dele for s in scores])),
        "ins": _pct(np.mean([s.ins for s in scores])),
    }


def mean_counting_failures(wers: Sequence[float], num_failed: int) -> float | None:
    """Mean WER in percent with each failed utterance counted as 100 % (an extra, not published)."""
    n = len(wers) + num_failed
    if n == 0:
        return None
    return _pct((float(np.sum(wers)) + num_failed) / n)
