"""Text normalisation of Seed-TTS-eval's `run_wer.py` (`process_one`), step for step.

1. Remove every character of `zhon.hanzi.punctuation + string.punctuation`
   except the ASCII apostrophe (the curly ’ is in zhon's set, so it goes).
2. Replace double spaces by one space, a single non-overlapping pass of
   `str.replace("  ", " ")`: three spaces become two, not one.
3. English: lowercase. Chinese: put a space between every character
   (including any space already there), so WER becomes a character error rate.

Nothing else: no number normalisation, no stripping. jiwer's default word
transform later collapses repeated spaces and strips the ends when it splits
into words, exactly as it did for the original script.
"""

from __future__ import annotations

import string

from zhon.hanzi import punctuation as _hanzi_punctuation

LANGUAGES = ("en", "zh")

PUNCTUATION = _hanzi_punctuation + string.punctuation
_DELETE = str.maketrans("", "", "".join(sorted(set(PUNCTUATION) - {"'"})))


def strip_punctuation(text: str) -> str:
    return text.translate(_DELETE)


def normalize_text(text: str, lang: str) -> str:
    """Normalises one reference or hypothesis the way seed-tts-eval does."""
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported language {lang!r} (expected one of {', '.join(LANGUAGES)})")
    text = strip_punctuation(text).replace("  ", " ")
    if lang == "zh":
        return " ".join(text)
    return text.lower()
