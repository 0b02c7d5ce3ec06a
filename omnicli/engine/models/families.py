"""What `omni models` shows and builds for each family: needs, presence, tiny builds."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from omnicli.engine.models import MODELS, checkpoint_specs
from omnicli.engine.models.checkpoints import status


@dataclass
class FamilyStatus:
    name: str
    description: str
    parts: list[tuple[str, bool, str]]  # (profile key, present, where / what is missing)

    @property
    def ready(self) -> bool:
        return all(p[1] for p in self.parts)


def family_status(name: str, model_path: str | None = None, codec_path: str | None = None) -> FamilyStatus:
    parts = []
    for spec in checkpoint_specs(name):
        value = model_path if spec.profile_key == "model_path" else codec_path
        present, where = status(spec, value)
        parts.append((f"{spec.profile_key} ({value or spec.default_repo})", present, where))
    if name == "neutts-air":  # its text frontend is an optional (GPL-3.0) install
        from omnicli.engine.models import phonemes

        parts.append(("espeak-ng + phonemizer", *phonemes.status()))
    return FamilyStatus(name, MODELS[name], parts)


TINY_FAMILIES = ("orpheus", "neutts-air")


def build_tiny(name: str, dest: Path, *, seed: int = 0, real_size: bool = False) -> dict:
    """Writes dest/talker and dest/codec (random weights, published layout), atomically."""
    if name not in TINY_FAMILIES:
        raise ValueError(f"build-tiny knows {', '.join(TINY_FAMILIES)}; got {name!r}")
    from omnicli.engine.models import neutts, orpheus

    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty; choose a new folder")
    tmp = dest.parent / f".{dest.name}.building"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    builder = {"orpheus": orpheus.build_tiny, "neutts-air": neutts.build_tiny}[name]
    info = builder(tmp, seed=seed, real_size=real_size)
    info.update(seed=seed, real_size=real_size)
    (tmp / "BUILD_INFO.json").write_text(json.dumps(info, indent=2) + "\n")
    if dest.exists():
        dest.rmdir()
    tmp.rename(dest)  # appears whole or not at all
    return info
