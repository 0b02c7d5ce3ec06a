"""Where the shipped presets live and what each one is for."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from omnicli.profile.errors import ProfileError, did_you_mean

PRESETS_ENV = "OMNI_PROFILES_DIR"


def presets_dir() -> Path:
    """The folder named by $OMNI_PROFILES_DIR, else the presets shipped in the
    package (`omnicli/data/profiles/`, installed with every wheel)."""
    override = os.environ.get(PRESETS_ENV)
    if override:
        return Path(override).expanduser()
    from omnicli.datasets import package_data_dir

    return package_data_dir() / "profiles"


def preset_names() -> list[str]:
    folder = presets_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def is_path(name_or_path: str | Path) -> bool:
    """A path (has a separator or a YAML suffix) rather than a preset name."""
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or "/" in text or os.sep in text or text.endswith((".yaml", ".yml"))


def locate(name_or_path: str | Path) -> tuple[str, Path]:
    """(display name, file) for a preset name or a path to a YAML file."""
    if is_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ProfileError(f"{path}: profile file not found")
        return path.stem, path
    name = str(name_or_path)
    path = presets_dir() / f"{name}.yaml"
    if not path.is_file():
        names = preset_names()
        raise ProfileError(
            f"unknown profile '{name}' (no {path}){did_you_mean(name, names)} "
            f"(presets: {', '.join(names) or 'none'}; or pass a path to a YAML file)"
        )
    return name, path


def header_description(path: Path) -> str:
    """The first paragraph of the comment block at the top of a YAML file."""
    lines: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped.startswith("#"):
            break
        body = stripped.lstrip("#").strip()
        if not body:
            if lines:
                break
            continue
        lines.append(body)
    return " ".join(lines)


@dataclass(frozen=True)
class PresetInfo:
    name: str
    path: Path
    description: str


def list_presets() -> list[PresetInfo]:
    folder = presets_dir()
    return [PresetInfo(n, folder / f"{n}.yaml", header_description(folder / f"{n}.yaml")) for n in preset_names()]
