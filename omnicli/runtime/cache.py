"""Where omnicli keeps built models and other reusable files."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$OMNI_CACHE_DIR`, else `$XDG_CACHE_HOME/omnicli`, else `~/.cache/omnicli`."""
    if os.environ.get("OMNI_CACHE_DIR"):
        return Path(os.environ["OMNI_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "omnicli"
