"""Datasets shipped with the repository."""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent


def demo_manifest_path() -> Path:
    """The demo set's Seed-TTS manifest (`datasets/demo/meta.lst`)."""
    path = _REPO / "datasets" / "demo" / "meta.lst"
    if not path.exists():
        raise FileNotFoundError(f"demo manifest not found at {path} (omnicli must be installed from its repository, editable)")
    return path
