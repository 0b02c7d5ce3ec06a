"""`"module:attr"` references, resolved on first use.

Registries (model families, engines, ASR backends) name their heavy parts
this way, so registering one imports nothing: `load_ref("pkg.mod:Class.start")`
imports `pkg.mod` and walks the dotted attribute path.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any


def load_ref(ref: str) -> Any:
    module, sep, attrs = ref.partition(":")
    if not sep or not module or not attrs:
        raise ValueError(f"not a 'module:attribute' reference: {ref!r}")
    target: Any = importlib.import_module(module)
    for name in attrs.split("."):
        target = getattr(target, name)
    return target


def module_exists(name: str) -> bool:
    """True when `name` can be imported; imports its parent packages, never `name` itself.

    `find_spec("a.b")` raises when `a` is missing, so each parent is probed first."""
    parts = name.split(".")
    return all(importlib.util.find_spec(".".join(parts[: i + 1])) is not None for i in range(len(parts)))
