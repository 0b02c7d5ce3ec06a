"""Data shipped inside the package: the demo set and the profile presets.

Both live under `omnicli/data/` and are installed with the wheel as package
data, so `omni` finds them from any install (editable, wheel, pipx), not only
from a checkout of the repository.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DATASETS = {"demo": "8-row Seed-TTS-format demo set with real flite prompts (meta.lst + prompts/)"}


def package_data_dir() -> Path:
    """`omnicli/data/` of the installed package (a real folder: omnicli is never run from a zip)."""
    return Path(str(files("omnicli").joinpath("data")))


def dataset_dir(name: str) -> Path:
    """The folder of a shipped dataset (see `DATASETS`)."""
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r} (shipped: {', '.join(sorted(DATASETS))})")
    path = package_data_dir() / name
    if not path.is_dir():
        raise FileNotFoundError(
            f"dataset {name!r} is missing from the installed package (expected {path}); reinstall omnicli"
        )
    return path


def demo_manifest_path() -> Path:
    """The demo set's Seed-TTS manifest (`meta.lst`, prompts relative to it)."""
    return dataset_dir("demo") / "meta.lst"
