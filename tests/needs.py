"""Test prerequisites that skip on a developer machine but fail in CI.

scripts/setup.sh installs every one of them, so in CI (CI=true, as `.ci/run`
sets) a missing one means set-up is broken: the run must go red, not quietly
skip the speech, ASR or WER tests that depend on it.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str) -> None:
    """Skip the test here; fail it in CI, where set-up should have provided the prerequisite."""
    if in_ci():
        pytest.fail(f"CI: prerequisite missing: {reason}", pytrace=False)
    pytest.skip(reason)


def module(name: str, reason: str | None = None) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(reason or f"{name} is not installed ({exc})")
        raise  # unreachable: missing() always raises


def program(name: str, reason: str | None = None) -> str:
    found = shutil.which(name)
    if found is None:
        missing(reason or f"{name} is not on PATH")
    return found


def path(location: Path, reason: str | None = None) -> Path:
    if not location.exists():
        missing(reason or f"{location} is missing")
    return location


def present(available: bool, reason: str) -> None:
    """Skip (fail in CI) unless `available`: for prerequisites found without importing them."""
    if not available:
        missing(reason)
