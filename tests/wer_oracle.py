"""An independent oracle of seed-tts-eval's WER procedure (used by test_wer_oracle.py and
test_eval_reference_voice.py).

It is written from the procedure of seed-tts-eval's `run_wer.py`
(`process_one`) and `average_wer.py`, not from omnicli's code:

1. for each character of `zhon.hanzi.punctuation + string.punctuation` other
   than the ASCII apostrophe, `text = text.replace(char, "")`;
2. `text = text.replace("  ", " ")` (one pass);
3. zh: `" ".join(list(text))`; en: `text.lower()`;
4. measures from jiwer with its default transform: runs of whitespace become one
   space (`\\s\\s+`), the ends are stripped, words are split on " ";
   wer = (S + D + I) / reference words;
5. sub, del, ins = S, D, I each divided by `len(truth.split(" "))`.

Edit distance is recomputed here by a plain dynamic programme (not jiwer); the
split into S, D and I among equally short alignments is jiwer's (the published
script reports jiwer's), so that split is taken from jiwer on the oracle's own
normalised strings.
"""

from __future__ import annotations

import re
import string

import jiwer
from zhon.hanzi import punctuation as hanzi_punctuation

SEED_PUNCTUATION = hanzi_punctuation + string.punctuation


def oracle_normalize(text: str, lang: str) -> str:
    for char in SEED_PUNCTUATION:
        if char == "'":
            continue
        text = text.replace(char, "")
    text = text.replace("  ", " ")
    if lang == "zh":
        return " ".join([c for c in text])
    return text.lower()


def oracle_words(text: str) -> list[str]:
    text = re.sub(r"\s\s+", " ", text).strip()
    return [w for w in text.split(" ") if len(w) >= 1]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1]


def oracle_score(truth: str, hypo: str, lang: str) -> dict | None:
    """None where the published script has no score (no reference words: it crashes)."""
    truth, hypo = oracle_normalize(truth, lang), oracle_normalize(hypo, lang)
    ref, hyp = oracle_words(truth), oracle_words(hypo)
    if not ref:
        return None
    distance = edit_distance(ref, hyp)
    measures = jiwer.process_words(truth, hypo)
    s, d, i = measures.substitutions, measures.deletions, measures.insertions
    assert s + d + i == distance  # jiwer's alignment is a shortest one
    n_seed = len(truth.split(" "))
    return {"wer": distance / len(ref), "sub": s / n_seed, "dele": d / n_seed, "ins": i / n_seed,
            "counts": (s, d, i), "ref_words": len(ref), "truth": truth, "hypo": hypo}
