"""The word diff of a row: jiwer's alignment of the normalised texts, the one the WER counted.

The per-utterance results keep `ref_norm` and `hyp_norm` (the project's
seed-tts-eval normalisation); aligning them with the same `jiwer.process_words`
call as `omnicli.evaluation.wer.score_utterance` gives back exactly the
substitutions, deletions and insertions in the row's WER.
"""

from __future__ import annotations

import jiwer

# One op per word: "=" equal, "s" substituted, "d" deleted, "i" inserted; [op, ref word, hyp word].
_OPS = {"equal": "=", "substitute": "s", "delete": "d", "insert": "i"}


def word_diff(ref_norm: str, hyp_norm: str) -> list[list[str]] | None:
    """[[op, ref_word, hyp_word], ...] in reference order; None when the reference has no words."""
    if not ref_norm.split():
        return None
    out = jiwer.process_words(ref_norm, hyp_norm)
    ref_words, hyp_words = out.references[0], out.hypotheses[0]
    ops: list[list[str]] = []
    for chunk in out.alignments[0]:
        op = _OPS[chunk.type]
        ref = ref_words[chunk.ref_start_idx:chunk.ref_end_idx]
        hyp = hyp_words[chunk.hyp_start_idx:chunk.hyp_end_idx]
        for i in range(max(len(ref), len(hyp))):
            ops.append([op, ref[i] if i < len(ref) else "", hyp[i] if i < len(hyp) else ""])
    return ops


def error_counts(ops: list[list[str]]) -> dict[str, int]:
    """Substitutions, deletions and insertions of a diff (they equal the row's WER counts)."""
    return {
        name: sum(1 for op in ops if op[0] == code)
        for name, code in (("substitutions", "s"), ("deletions", "d"), ("insertions", "i"))
    }
