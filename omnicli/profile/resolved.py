"""ResolvedProfile: a validated Profile plus where it came from and its digest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional

from omnicli.profile.schema import SECTIONS, Profile


def leaf_keys() -> list[str]:
    """Every dotted key of the schema; `model_options` counts as one leaf."""
    keys = []
    for name in Profile.model_fields:
        if name in SECTIONS:
            keys += [f"{name}.{sub}" for sub in SECTIONS[name].model_fields]
        else:
            keys.append(name)
    return keys


def flatten(data: dict) -> dict[str, Any]:
    """A profile dict as {dotted key: value} over `leaf_keys()`."""
    flat = {}
    for key in leaf_keys():
        node: Any = data
        for part in key.split("."):
            node = node[part]
        flat[key] = node
    return flat


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ResolvedProfile:
    """The profile an engine runs with.

    `platform` is the effective device ('cpu'/'cuda') the profile was resolved
    for; `origins` maps each dotted key to the file it came from, 'default'
    (schema default), 'platform:cpu'/'platform:cuda' or '--set'.
    """

    profile: Profile
    name: str
    source: Optional[Path]
    platform: str
    origins: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The resolved settings as plain JSON-able data."""
        return self.profile.model_dump(mode="json")

    def flat(self) -> dict[str, Any]:
        return flatten(self.to_dict())

    @cached_property
    def digest(self) -> str:
        """First 16 hex of sha256 over the canonical JSON of `to_dict()`: equal
        settings give equal digests whatever file or key order produced them."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()[:16]


def diff_profiles(a: ResolvedProfile, b: ResolvedProfile) -> list[tuple[str, Any, Any]]:
    """(dotted key, value in a, value in b) for every key whose values differ."""
    fa, fb = a.flat(), b.flat()
    return [(k, fa[k], fb[k]) for k in fa if canonical_json(fa[k]) != canonical_json(fb[k])]


__all__ = ["ResolvedProfile", "diff_profiles", "flatten", "leaf_keys", "canonical_json"]
