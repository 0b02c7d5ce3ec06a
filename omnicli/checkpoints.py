"""Finds a model family's checkpoints on disk; never downloads.

A checkpoint is given as a local folder or as a Hugging Face repository id
(`owner/name`), looked up in the Hugging Face cache the way `HF_HUB_OFFLINE=1`
would: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`,
then `models--owner--name/snapshots/<revision>/` where the revision is
`refs/main` (or the only snapshot). A checkpoint counts as present only when
every file the family needs is there; otherwise `CheckpointMissing` names
every place looked and how to provide the files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from omnicli.errors import UsageError


class CheckpointMissing(UsageError):
    """A checkpoint the profile names is not on disk, or lacks files: bad usage (exit 2),
    found before any engine starts (and raised again if it vanishes before the engine loads it)."""

    headline = "checkpoint missing"
    message_below = True  # one line per place looked


@dataclass(frozen=True)
class CheckpointSpec:
    """What one part of a family (talker or codec) needs on disk."""

    role: str  # "talker" / "codec": the profile key is f"{role}" -> model_path / codec_path
    profile_key: str
    default_repo: str  # the published repository id, tried when the profile names none
    required: tuple[tuple[str, ...], ...]  # each entry: alternatives, one of which must exist


def hf_cache_dirs() -> list[Path]:
    if os.environ.get("HF_HUB_CACHE"):
        return [Path(os.environ["HF_HUB_CACHE"]).expanduser()]
    if os.environ.get("HF_HOME"):
        return [Path(os.environ["HF_HOME"]).expanduser() / "hub"]
    return [Path.home() / ".cache" / "huggingface" / "hub"]


def _may_be_repo_id(value: str) -> bool:
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "~"))


def _snapshot(repo_root: Path) -> Path | None:
    snaps = repo_root / "snapshots"
    ref = repo_root / "refs" / "main"
    if ref.is_file():
        candidate = snaps / ref.read_text().strip()
        if candidate.is_dir():
            return candidate
    found = sorted(p for p in snaps.glob("*") if p.is_dir()) if snaps.is_dir() else []
    return found[0] if len(found) == 1 else None


def candidates(spec: CheckpointSpec, value: str | None) -> list[Path]:
    """Every folder that may hold the checkpoint, in the order they are tried."""
    value = value or spec.default_repo
    folder = Path(value).expanduser()
    if not _may_be_repo_id(value):
        return [folder]
    # `owner/name` may also be a relative folder: tried first, and reported
    # unless it is the family's default repo id and no such folder exists.
    owner, name = value.split("/")
    out = [folder] if folder.exists() or value != spec.default_repo else []
    for cache in hf_cache_dirs():
        root = cache / f"models--{owner}--{name}"
        snap = _snapshot(root)
        out.append(snap if snap is not None else root / "snapshots" / "<revision>")
    return out


def missing_files(folder: Path, spec: CheckpointSpec) -> list[str]:
    if not folder.is_dir():
        return ["(the folder itself)"]
    return [" or ".join(alts) for alts in spec.required if not any((folder / a).is_file() for a in alts)]


def locate(spec: CheckpointSpec, value: str | None, family: str) -> Path:
    """The folder holding a complete checkpoint, or CheckpointMissing naming every place looked."""
    looked = []
    for folder in candidates(spec, value):
        missing = missing_files(folder, spec)
        if not missing:
            return folder
        looked.append(f"  {folder}: missing {', '.join(missing)}")
    given = value or f"{spec.default_repo} (default)"
    raise CheckpointMissing(
        f"{family}: no complete {spec.role} checkpoint for {spec.profile_key}={given}; looked in:\n"
        + "\n".join(looked)
        + f"\nProvide it with --set {spec.profile_key}=DIR (a folder with those files), or place the"
        f" Hugging Face repository {spec.default_repo} in the Hugging Face cache (HF_HUB_CACHE / HF_HOME);"
        " nothing is downloaded. For a test checkpoint: omni models build-tiny"
        f" {family} DIR, then --set {spec.profile_key}=DIR/{spec.role}."
    )


def status(spec: CheckpointSpec, value: str | None) -> tuple[bool, str]:
    """(present, where or what is missing) for `omni models list`."""
    notes = []
    for folder in candidates(spec, value):
        missing = missing_files(folder, spec)
        if not missing:
            return True, str(folder)
        notes.append(f"{folder} (missing {', '.join(missing)})")
    return False, "; ".join(notes)


def write_published_talker_config(path: Path, *, rope_theta: float, keep_rope_scaling: bool) -> None:
    """Rewrite a talker config saved by transformers 5 (`rope_parameters`, `dtype`) in the published
    transformers 4 keys (`rope_theta`, `rope_scaling`, `torch_dtype`), so loaders meet what users have.

    `keep_rope_scaling`: keep what is left of `rope_parameters` as `rope_scaling` (Llama 3.2's scaled
    RoPE); otherwise `rope_scaling` is null, as in the published Qwen2 config.
    """
    cfg = json.loads(path.read_text())
    rope = dict(cfg.pop("rope_parameters", None) or {})
    cfg["rope_theta"] = rope.pop("rope_theta", rope_theta)
    cfg["rope_scaling"] = (rope or None) if keep_rope_scaling else None
    cfg["torch_dtype"] = cfg.pop("dtype", "bfloat16")
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
