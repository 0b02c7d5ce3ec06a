"""ProfileError and the helpers that make its messages point at a key."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from omnicli.errors import UsageError


class ProfileError(UsageError):
    """A profile could not be loaded. Each problem names the file (and line),
    the dotted key and the reason; `problems` holds them one by one."""

    headline = "profile error"

    def __init__(self, problems: str | Sequence[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


def show_path(path: Path) -> str:
    """A path as a user would type it: relative to the cwd when it lies below it."""
    try:
        if Path(path).resolve().is_relative_to(Path.cwd().resolve()):
            return os.path.relpath(path)
    except (OSError, ValueError):
        pass
    return os.path.normpath(path)


def did_you_mean(word: str, candidates: Iterable[str], prefix: str = "") -> str:
    """'; did you mean 'PREFIX+X'?' for the closest candidate X, or ''."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""
