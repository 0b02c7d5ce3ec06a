"""Make vLLM-Omni importable on a machine without CPU builds of torchvision and torchaudio.

vLLM-Omni's import chain names both packages although its TTS pipelines use
neither (import_shims/README.md says where). `install_import_shims()` puts a
stand-in on the import path for each of them that is NOT installed, and only
then: a real installed package is never shadowed. It is called by this
backend alone, before it imports vllm_omni; the native engine never calls it.

The stand-ins reach vLLM-Omni's other processes two ways: `multiprocessing`'s
spawn hands `sys.path` to the stage processes, and PYTHONPATH (extended here,
for this process's children only) covers the plain subprocesses vLLM runs to
inspect model classes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SHIM_DIR = Path(__file__).with_name("import_shims")
SHIMMED = ("torchvision", "torchaudio")


def install_import_shims() -> list[str]:
    """Adds the stand-ins for whichever of SHIMMED is not installed; returns the names stood in (idempotent)."""
    missing = [name for name in SHIMMED if not _stood_in(name) and importlib.util.find_spec(name) is None]
    if missing:
        dirs = [str(SHIM_DIR / "common"), *(str(SHIM_DIR / f"for_{name}") for name in missing)]
        sys.path.extend(d for d in dirs if d not in sys.path)
        current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(current + [d for d in dirs if d not in current])
        importlib.invalidate_caches()
    return stood_in()


def stood_in() -> list[str]:
    """Names among SHIMMED that resolve to a stand-in (for logs and tests)."""
    return [name for name in SHIMMED if _stood_in(name)]


def _stood_in(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return bool(spec is not None and spec.origin and Path(spec.origin).is_relative_to(SHIM_DIR))
