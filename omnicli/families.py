"""Model families: the one registry that profiles, engines and `omni models` read.

A family is registered once, by name, with everything the toolkit needs to
know about it: which engine runs it, what it needs on disk, how to build a
random-weight copy and which parity checks `omni models verify` runs.
Heavy parts are `"module:callable"` strings (`omnicli.lazy.load_ref`),
resolved on use, so registering a family imports neither torch nor vLLM.

The native families register in `omnicli.engine.models.registrations`; a
backend package adds its own in its `families` module (listed in
REGISTRATIONS, imported when present). Adding a family is one adapter
module plus one `register_family(Family(...))`.
"""

from __future__ import annotations

import difflib
import json
import math
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omnicli.atomic import current_umask
from omnicli.errors import EXIT_OK, EXIT_SOME_FAILED, UsageError
from omnicli.lazy import load_ref, module_exists

if TYPE_CHECKING:
    from omnicli.checkpoints import CheckpointSpec
    from omnicli.parity.checks import Check

# Modules whose import registers families; a missing optional one is skipped.
REGISTRATIONS = ("omnicli.engine.models.registrations", "omnicli.vllm_omni.families",
                 "omnicli.reference_voice.families")


def _no_checkpoints() -> list[CheckpointSpec]:
    return []


@dataclass(frozen=True)
class Family:
    name: str  # what `model:` in a profile says
    description: str
    engine: str  # key into omnicli.engine.backends.ENGINES: "native" | "vllm-omni" | "onnx-reference"
    checkpoint_specs: Callable[[], list[CheckpointSpec]] = _no_checkpoints  # cheap; imports lazily
    load_adapter: str | None = (
        None  # "module:callable(*, seed, codec_dtype, model_path, codec_path, options) -> ModelAdapter"
    )
    build_tiny: str | None = None  # "module:callable(dest: Path, *, seed: int, real_size: bool, **options) -> dict"
    # keyword options its builder takes beyond seed and real_size, e.g. ("stop_frames",) for qwen3-tts
    build_tiny_options: tuple[str, ...] = ()
    parity_checks: str | None = None  # "module:callable(checkpoint: Path, *, seed: int) -> list[Check]"
    ring_cache: bool = False  # its codec keeps per-slot ring caches (`codec_ring_headroom` applies)
    extra_status: Callable[[], tuple[bool, str]] | None = None  # a further need, e.g. espeak-ng: (present, where)
    extra_label: str = ""  # what `omni models list` calls that need
    requires: tuple[str, ...] = ()  # importable modules the family needs
    install_hint: str = ""  # how to get `requires`
    # model_options key by which a profile consents to code from the checkpoint folder (auto_map); None: never
    remote_code_option: str | None = None


class UnknownFamily(UsageError, ValueError):
    """A family name that is not registered (a ValueError too, so profile validation reports it)."""


class FamilyUnavailable(UsageError):
    """A registered family whose `requires` are not installed."""


_FAMILIES: dict[str, Family] = {}
_loaded = False


def register_family(family: Family) -> None:
    if family.name in _FAMILIES:
        raise ValueError(f"model family {family.name!r} is registered twice")
    _FAMILIES[family.name] = family


def _load_registrations() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    for module in REGISTRATIONS:
        if module_exists(module):
            importlib.import_module(module)


def family_names() -> list[str]:
    """Registered names, in registration order (native families first)."""
    _load_registrations()
    return list(_FAMILIES)


def get_family(name: str) -> Family:
    _load_registrations()
    if name in _FAMILIES:
        return _FAMILIES[name]
    close = difflib.get_close_matches(name, list(_FAMILIES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise UnknownFamily(f"unknown model family {name!r}{hint} (known: {', '.join(_FAMILIES)})")


def missing_requirements(family: Family) -> list[str]:
    return [m for m in family.requires if not module_exists(m)]


def check_available(name: str) -> Family:
    """The family, or FamilyUnavailable naming what to install."""
    family = get_family(name)
    missing = missing_requirements(family)
    if missing:
        hint = f": {family.install_hint}" if family.install_hint else ""
        raise FamilyUnavailable(f"model family {name!r} needs {', '.join(missing)}, which is not installed{hint}")
    return family


# -- what `omni models` shows, checks and builds ------------------------------------


def check_checkpoints(name: str, model_path: str | None, codec_path: str | None,
                      model_options: dict | None = None) -> None:
    """Raises CheckpointMissing naming every place looked when a part is not on disk, and
    ModelFileError when a part names code of its own or holds a damaged file (omnicli.model_files).
    Code of its own is allowed only for a family with `remote_code_option` whose profile sets it to true."""
    family = get_family(name)
    option = family.remote_code_option
    trusted = option is not None and (model_options or {}).get(option) is True
    specs = family.checkpoint_specs()
    if not specs:
        return
    from omnicli.checkpoints import CheckpointMissing, locate
    from omnicli.model_files import check_model_folder

    problems = []
    for spec in specs:
        try:
            folder = locate(spec, model_path if spec.profile_key == "model_path" else codec_path, name)
        except CheckpointMissing as exc:
            problems.append(str(exc))
            continue
        check_model_folder(folder, allow_remote_code=trusted)  # ModelFileError (bad input): remote code, damage
    if problems:
        raise CheckpointMissing("\n".join(problems))


@dataclass
class FamilyStatus:
    name: str
    description: str
    parts: list[tuple[str, bool, str]]  # (profile key, present, where / what is missing)

    @property
    def ready(self) -> bool:
        return all(p[1] for p in self.parts)


def family_status(name: str, model_path: str | None = None, codec_path: str | None = None) -> FamilyStatus:
    family = get_family(name)
    parts = []
    specs = family.checkpoint_specs()
    if specs:
        from omnicli.checkpoints import status

        for spec in specs:
            value = model_path if spec.profile_key == "model_path" else codec_path
            present, where = status(spec, value)
            parts.append((f"{spec.profile_key} ({value or spec.default_repo})", present, where))
    for module in family.requires:
        present = module_exists(module)
        parts.append((module, present, "installed" if present else f"not installed ({family.install_hint})"))
    if family.extra_status is not None:
        parts.append((family.extra_label, *family.extra_status()))
    return FamilyStatus(name, family.description, parts)


def tiny_families() -> list[str]:
    return [name for name in family_names() if _FAMILIES[name].build_tiny]


def build_tiny(name: str, dest: Path, *, seed: int = 0, real_size: bool = False,
               stop_frames: float | None = None) -> dict:
    """Writes dest/talker and dest/codec (random weights, published layout), atomically.

    `stop_frames`: a talker that ends by EOS after about that many frames on average (geometric
    lengths); only families whose builder lists it in `build_tiny_options` (qwen3-tts) take it.
    Every refusal is raised before anything is imported or written."""
    family = get_family(name)
    if family.build_tiny is None:
        raise ValueError(f"build-tiny knows {', '.join(tiny_families())}; got {name!r}")
    options: dict = {}
    if stop_frames is not None:
        if "stop_frames" not in family.build_tiny_options:
            takers = [n for n in family_names() if "stop_frames" in _FAMILIES[n].build_tiny_options]
            raise ValueError(f"--stop-frames is not an option of {name}'s build (only {', '.join(takers)}): "
                             "its talker has no stop setting to write")
        if not (math.isfinite(stop_frames) and stop_frames > 1):
            raise ValueError(f"--stop-frames is a mean length in talker frames and must be above 1; got {stop_frames}")
        options["stop_frames"] = float(stop_frames)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty; choose a new folder")
    builder = load_ref(family.build_tiny)
    tmp = dest.parent / f".{dest.name}.building"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    info = builder(tmp, seed=seed, real_size=real_size, **options)
    info.update(seed=seed, real_size=real_size, **options)
    (tmp / "BUILD_INFO.json").write_text(json.dumps(info, indent=2) + "\n")
    mode = 0o666 & ~current_umask()
    for path in tmp.rglob("*"):  # safetensors writes its files 0600; every file gets the umask's mode (0644)
        if path.is_file():
            path.chmod(mode)
    if dest.exists():
        dest.rmdir()
    tmp.rename(dest)  # appears whole or not at all
    return info


@dataclass
class ParityReport:
    """A family's parity checks, in the order they ran; `exit_code` 1 when any mismatched (README's table)."""

    checks: list[Check]

    def __iter__(self) -> Iterator[Check]:
        return iter(self.checks)

    def count(self, status: str) -> int:
        return sum(check.status == status for check in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_SOME_FAILED if self.count("mismatch") else EXIT_OK


def run_parity_checks(name: str, checkpoint: Path, *, seed: int = 0) -> ParityReport:
    family = get_family(name)
    if family.parity_checks is None:
        known = ", ".join(n for n in family_names() if _FAMILIES[n].parity_checks)
        raise ValueError(f"no parity checks for {name!r} (known: {known})")
    return ParityReport(load_ref(family.parity_checks)(checkpoint, seed=seed))
