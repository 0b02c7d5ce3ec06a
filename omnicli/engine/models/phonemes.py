"""espeak-ng phonemes, the text frontend of NeuTTS.

NeuTTS prompts carry phonemes, not text: the reference transcript and the
target text are each phonemized by espeak-ng through the `phonemizer`
package, with the options the reference package uses (language per model,
punctuation kept, stress marks on, word-count mismatches ignored, language
switch flags removed), and whitespace collapsed to single spaces. Prompt
parity depends on this string, so the options are fixed here, not in a
profile.

espeak-ng (Debian `espeak-ng`) and `phonemizer` are GPL-3.0; both are an
optional part of the install (the `neutts` extra, `scripts/setup.sh`).
"""

from __future__ import annotations

import threading

ESPEAK_OPTIONS = dict(
    preserve_punctuation=True, with_stress=True, words_mismatch="ignore", language_switch="remove-flags"
)


class PhonemizerMissing(RuntimeError):
    """The phonemizer package or the espeak-ng library is not installed."""


class Phonemizer:
    """text -> espeak-ng phoneme string (one space between words)."""

    def __init__(self, language: str = "en-us"):
        try:
            from phonemizer.backend import EspeakBackend
        except ImportError as exc:
            raise PhonemizerMissing(
                "NeuTTS needs the `phonemizer` package (pip install 'omnicli[neutts]') and espeak-ng "
                "(apt-get install espeak-ng); both are GPL-3.0"
            ) from exc
        try:
            self._backend = EspeakBackend(language=language, **ESPEAK_OPTIONS)
        except RuntimeError as exc:  # phonemizer raises RuntimeError when the espeak library is absent
            raise PhonemizerMissing(
                f"espeak-ng is not usable ({exc}); install it with apt-get install espeak-ng"
            ) from exc
        self.language = language
        self._lock = threading.Lock()  # one espeak instance is not safe to share across threads

    def __call__(self, text: str) -> str:
        if not text.strip():
            return ""
        with self._lock:
            phones = self._backend.phonemize([text])[0]
        return " ".join(phones.split())


def status() -> tuple[bool, str]:
    """(usable, what) of the frontend, for `omni models list`."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("phonemizer") is None:
        return False, "phonemizer not installed (pip install 'omnicli[neutts]')"
    if shutil.which("espeak-ng") is None and shutil.which("espeak") is None:
        return False, "espeak-ng not installed (apt-get install espeak-ng)"
    return True, "phonemizer + espeak-ng"
