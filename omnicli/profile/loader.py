"""Turn YAML files + platform + --set overrides into one validated Profile.

Order: base_config chain (deepest base first) -> `platforms.<platform>`
overlay -> --set overrides -> schema validation -> platform checks.
Every leaf remembers where its value came from (file, platform overlay,
--set or the schema default) so errors and `omni profiles show` can say so.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml
from pydantic import ValidationError

from omnicli.errors import UsageError
from omnicli.profile.deploy_files import MAX_CHAIN, check_deploy_config
from omnicli.profile.errors import ProfileError, did_you_mean, show_path
from omnicli.profile.passthrough import PASSTHROUGH_SECTIONS, check_passthrough
from omnicli.profile.platform import detect_platform
from omnicli.profile.presets import locate
from omnicli.profile.resolved import ResolvedProfile, leaf_keys
from omnicli.profile.safe_yaml import YamlShapeError, load_checked
from omnicli.profile.schema import REPLACED_WHOLE, SECTIONS, Profile, check_platform
from omnicli.runtime.files import UserFileError, read_user_text

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

TOP_KEYS = tuple(Profile.model_fields)
META_KEYS = ("base_config", "platforms")
PLATFORMS = ("cpu", "cuda")
MAX_PROFILE_BYTES = 1 << 20  # presets are a few KiB


# ----------------------------------------------------------------- reading


def _read_yaml(path: Path) -> tuple[dict, dict[str, int]]:
    """The mapping in a file and the line of every dotted key in it."""
    try:
        text = read_user_text(path, max_bytes=MAX_PROFILE_BYTES)  # not a FIFO or /dev/zero: profiles are user input
    except UserFileError as exc:
        raise ProfileError(f"{show_path(path)}: cannot read profile: {exc.reason}") from None
    try:
        node, data = load_checked(text)  # bounded depth and alias expansion: profiles are user input
    except YamlShapeError as exc:
        raise ProfileError(f"{show_path(path)}:{exc.line}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{show_path(path)}:{mark.line + 1}" if mark else show_path(path)
        reason = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(f"{where}: invalid YAML: {reason}") from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ProfileError(
            f"{show_path(path)}:1: the top level must be a mapping of settings (got {type(data).__name__})"
        )
    lines: dict[str, int] = {}
    problems: list[str] = []
    _index_lines(node, "", lines, problems, show_path(path))
    if problems:
        raise ProfileError(problems)
    return data, lines


def _index_lines(node: yaml.Node, prefix: str, lines: dict[str, int], problems: list[str], where: str) -> None:
    if isinstance(node, yaml.SequenceNode):  # list items by index: vllm_omni.deploy_config.stages.0.dtype
        for i, item in enumerate(node.value):
            _index_lines(item, f"{prefix}{i}.", lines, problems, where)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = prefix + str(key_node.value)
        line = key_node.start_mark.line + 1
        if key in seen:  # safe_load would silently keep the last one
            problems.append(f"{where}:{line}: {key}: duplicate key")
        seen.add(key)
        lines[key] = line
        _index_lines(value_node, key + ".", lines, problems, where)


# ------------------------------------------------------- structural checks


def _unknown_key(key: str, prefix: str, candidates: Sequence[str]) -> str:
    hint = did_you_mean(key, candidates, prefix)
    if hint:
        return f"unknown key{hint}"
    homes = [f"{s}.{key}" for s, m in SECTIONS.items() if key in m.model_fields] + (
        [key] if key in TOP_KEYS and prefix else []
    )
    if homes:
        return f"unknown key here; it belongs at {' or '.join(homes)}"
    # A misspelt key of another section, e.g. `maxnumseqs` at the top level.
    elsewhere = {sub: f"{s}.{sub}" for s, m in SECTIONS.items() for sub in m.model_fields}
    close = difflib.get_close_matches(key, list(elsewhere), n=1, cutoff=0.75)
    if close:
        return f"unknown key; did you mean '{elsewhere[close[0]]}'?"
    return f"unknown key (known here: {', '.join(candidates)})"


def _mapping(value: Any, dotted: str, what: str, problems: list[str], where: Callable[[str], str]) -> dict | None:
    if value is None:  # `talker:` with every key commented out
        return {}
    if not isinstance(value, dict):
        problems.append(f"{where(dotted)}: {dotted}: must be a mapping of {what} (got {type(value).__name__})")
        return None
    return value


def _normalize(data: dict, prefix: str, allow_meta: bool, problems: list[str], where: Callable[[str], str]) -> dict:
    """Check one file's (or platform overlay's) keys against the schema;
    returns a copy with null sections turned into empty mappings."""
    out: dict = {}
    allowed = TOP_KEYS + (META_KEYS if allow_meta else ())
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if not isinstance(key, str):
            problems.append(f"{where(dotted)}: {dotted}: keys must be strings")
        elif key not in allowed:
            if key in META_KEYS:
                problems.append(f"{where(dotted)}: {dotted}: only allowed at the top level of a file")
            else:
                problems.append(f"{where(dotted)}: {dotted}: {_unknown_key(key, prefix, allowed)}")
        elif key == "base_config":
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{where(dotted)}: base_config: must be a path to a YAML file (got {value!r})")
            else:
                out[key] = value
        elif key == "platforms":
            overlays = _mapping(value, dotted, "platform overlays (cpu, cuda)", problems, where)
            for plat, overlay in (overlays or {}).items():
                pdotted = f"platforms.{plat}"
                if plat not in PLATFORMS:
                    problems.append(
                        f"{where(pdotted)}: {pdotted}: unknown platform{did_you_mean(str(plat), PLATFORMS)} "
                        f"(platforms are {', '.join(PLATFORMS)})"
                    )
                    continue
                overlay = _mapping(overlay, pdotted, "settings", problems, where)
                if overlay is None:
                    continue
                if "device" in overlay:
                    problems.append(f"{where(pdotted + '.device')}: {pdotted}.device: "
                                    "device selects the platform overlay, so an overlay cannot set it")
                    overlay = {k: v for k, v in overlay.items() if k != "device"}
                out.setdefault("platforms", {})[plat] = _normalize(overlay, pdotted + ".", False, problems, where)
        elif key in SECTIONS:
            section = _mapping(value, dotted, f"{key} settings", problems, where)
            fields = tuple(SECTIONS[key].model_fields)
            if section is not None:
                for sub in section:
                    if sub not in fields:
                        sdotted = f"{dotted}.{sub}"
                        problems.append(f"{where(sdotted)}: {sdotted}: {_unknown_key(str(sub), dotted + '.', fields)}")
                out[key] = {k: v for k, v in section.items() if k in fields}
                if key == "vllm_omni":
                    _check_passthrough(out[key], dotted, problems, where)
        elif key in REPLACED_WHOLE:
            mapping = _mapping(value, dotted, "options", problems, where)
            if mapping is not None:
                out[key] = mapping
        else:
            out[key] = value
    return out


def _check_passthrough(section: dict, dotted: str, problems: list[str], where: Callable[[str], str]) -> None:
    """The raw vLLM-Omni keys of one file's `vllm_omni` section against the allow-list (passthrough.py)."""
    for name in PASSTHROUGH_SECTIONS:
        for sub, reason in check_passthrough(name, section.get(name)):
            key = f"{dotted}.{name}.{sub}" if sub else f"{dotted}.{name}"
            problems.append(f"{where(key)}: {key}: {reason}")


# ------------------------------------------------------------------ merging


def _replaced_whole(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] == "platforms":
        parts = parts[2:]
    return len(parts) == 1 and parts[0] in REPLACED_WHOLE


class _Tree:
    """The merged settings plus, per leaf, an origin label and a location."""

    def __init__(self) -> None:
        self.data: dict = {}
        self.origins: dict[str, str] = {}
        self.locations: dict[str, str] = {}

    def merge(self, overlay: dict, label: str, locate_key: Callable[[str], str]) -> None:
        self._merge(self.data, overlay, "", label, locate_key)

    def _merge(self, base: dict, overlay: dict, prefix: str, label: str, locate_key: Callable[[str], str]) -> None:
        for key, value in overlay.items():
            dotted = prefix + key
            if isinstance(value, dict) and isinstance(base.get(key), dict) and not _replaced_whole(dotted):
                self._merge(base[key], value, dotted + ".", label, locate_key)
                continue
            base[key] = copy.deepcopy(value)  # scalars and lists: overlay wins whole
            self.forget(dotted)
            self._record(value, dotted, label, locate_key)

    def _record(self, value: Any, dotted: str, label: str, locate_key: Callable[[str], str]) -> None:
        if isinstance(value, dict) and not _replaced_whole(dotted):
            for key, sub in value.items():
                self._record(sub, f"{dotted}.{key}", label, locate_key)
        else:
            self.origins[dotted] = label
            self.locations[dotted] = locate_key(dotted)

    def forget(self, dotted: str) -> None:
        for table in (self.origins, self.locations):
            for key in [k for k in table if k == dotted or k.startswith(dotted + ".")]:
                del table[key]


def _locator(label: str, lines: dict[str, int]) -> Callable[[str], str]:
    def where(dotted: str) -> str:
        return f"{label}:{lines[dotted]}" if dotted in lines else label
    return where


def _load_chain(path: Path) -> _Tree:
    """Settings of `path` over those of its base_config chain, read file by file (linear in the
    chain's length, at most MAX_CHAIN files), then merged from the deepest base up."""
    layers: list[tuple[str, dict, Callable[[str], str]]] = []
    walked: list[Path] = []
    seen: set[Path] = set()
    current = path
    while True:
        data, lines = _read_yaml(current)
        label = show_path(current)
        where = _locator(label, lines)
        problems: list[str] = []
        layer = _normalize(data, "", True, problems, where)
        if problems:
            raise ProfileError(problems)
        walked.append(current)
        seen.add(current.resolve())
        layers.append((label, layer, where))
        base = layer.pop("base_config", None)
        if base is None:
            break
        base_path = Path(base).expanduser()
        if not base_path.is_absolute():
            base_path = current.parent / base_path  # relative to the overlay's folder
        if base_path.resolve() in seen:
            shown = " -> ".join(show_path(p) for p in (*walked, base_path))
            raise ProfileError(f"{where('base_config')}: base_config: inheritance cycle: {shown}")
        if len(walked) >= MAX_CHAIN:
            raise ProfileError(f"{where('base_config')}: base_config: an inheritance chain of more than {MAX_CHAIN} "
                               f"files (from {show_path(path)}); flatten it")
        if not base_path.is_file():
            shown = " -> ".join(show_path(p) for p in (*walked, base_path))
            raise ProfileError(f"{where('base_config')}: base_config: file not found: {show_path(base_path)} "
                               f"(chain: {shown})")
        current = base_path
    tree = _Tree()
    for label, layer, where in reversed(layers):
        tree.merge(layer, label, where)
    return tree


# -------------------------------------------------------------- overrides


SET_KEYS = tuple(k for k in leaf_keys() if k != "model_options")


def _parse_sets(overrides: Sequence[str], problems: list[str]) -> list[tuple[str, Any]]:
    parsed = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(f"--set {item}: expected KEY=VALUE, e.g. --set codec.max_num_seqs=32")
            continue
        parts = key.split(".")
        head = parts[0]
        if head in META_KEYS:
            problems.append(f"--set {key}: {head} cannot be overridden; write it in a profile file")
            continue
        if head in SECTIONS and len(parts) == 1:
            problems.append(f"--set {key}: set one key at a time, e.g. --set {head}.max_num_seqs=8")
            continue
        known = head in REPLACED_WHOLE or key in SET_KEYS
        if not known:
            problems.append(f"--set {key}: unknown key{did_you_mean(key, leaf_keys())}")
            continue
        try:
            value = load_checked(raw)[1]
        except YamlShapeError as exc:
            problems.append(f"--set {key}: {exc.reason}")
            continue
        except yaml.YAMLError as exc:
            problems.append(f"--set {key}: value {raw!r} is not valid YAML ({getattr(exc, 'problem', exc)})")
            continue
        if key in REPLACED_WHOLE and value is None:
            value = {}
        section = key.removeprefix("vllm_omni.")
        if head == "vllm_omni" and section in PASSTHROUGH_SECTIONS:
            refused = check_passthrough(section, value)
            problems += [f"--set {key}.{sub}: {reason}" if sub else f"--set {key}: {reason}" for sub, reason in refused]
            if refused:
                continue
        parsed.append((key, value))
    return parsed


def _apply_set(tree: _Tree, key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree.data
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)
    leaf = parts[0] if parts[0] in REPLACED_WHOLE else key  # model_options is one leaf
    tree.forget(leaf)
    tree.origins[leaf] = "--set"
    tree.locations[leaf] = "--set"


# -------------------------------------------------------------- validation


def _format_error(err: ErrorDetails, tree: _Tree, fallback: str) -> str:
    loc = [str(p) for p in err["loc"] if not isinstance(p, int)]
    ctx = err.get("ctx") or {}
    if "key" in ctx:  # a model-level rule that names its key
        loc.append(str(ctx["key"]))
    dotted = ".".join(loc)
    indexes = "".join(f"[{p}]" for p in err["loc"] if isinstance(p, int))
    where = next((tree.locations[k] for k in _prefixes(dotted) if k in tree.locations), fallback)
    message = err["msg"].removeprefix("Value error, ")
    shown = err.get("input")
    got = "" if isinstance(shown, dict) or err["type"] in ("missing", "extra_forbidden") else f" (got {_show(shown)})"
    if where == "--set":
        return f"--set {dotted}{indexes}: {message}{got}"
    return f"{where}: {dotted}{indexes}: {message}{got}"


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


# -------------------------------------------------------------------- API


def load_profile(
    name_or_path: str | Path | None = None,
    overrides: Sequence[str] = (),
    platform: Optional[str] = None,
) -> ResolvedProfile:
    """Resolve a preset name (omnicli/data/profiles/NAME.yaml, or $OMNI_PROFILES_DIR/NAME.yaml) or YAML path,
    default preset when None, for `platform` ('cpu'/'cuda'; detected when None, forced by the
    profile's `device`), with `--set key=value` overrides applied last."""
    if platform is not None and platform not in PLATFORMS:
        raise ProfileError(f"platform must be one of {', '.join(PLATFORMS)} (got {platform!r})")
    name, path = locate("default" if name_or_path is None else name_or_path)
    tree = _load_chain(path)
    fallback = show_path(path)

    problems: list[str] = []
    sets = _parse_sets(list(overrides), problems)
    if problems:
        raise ProfileError(problems)

    # The device (after --set) selects the platform overlay.
    device = next((v for k, v in reversed(sets) if k == "device"), tree.data.get("device", "auto"))
    if device in PLATFORMS:
        chosen = device
    else:
        chosen = platform or detect_platform()
    overlays = tree.data.pop("platforms", {})
    overlay_locations = dict(tree.locations)
    tree.forget("platforms")
    tree.merge(
        overlays.get(chosen, {}),
        f"platform:{chosen}",
        lambda dotted: overlay_locations.get(f"platforms.{chosen}.{dotted}", fallback),
    )
    for key, value in sets:
        _apply_set(tree, key, value)

    problems = [
        f"--set {k}: {reason}"
        if tree.locations.get(k) == "--set"
        else f"{tree.locations.get(k, fallback)}: {k}: {reason}"
        for k, reason in check_platform(tree.data, chosen)
    ]
    try:
        profile = Profile.model_validate(tree.data)
    except ValidationError as exc:
        problems = [_format_error(e, tree, fallback) for e in exc.errors()] + problems
    if problems:
        raise ProfileError(problems)
    deploy = profile.vllm_omni.base_deploy_config
    if deploy is not None:
        try:
            check_deploy_config(deploy)  # every file of its chain, before any engine reads it
        except UsageError as exc:  # DeployFileError, or ModelFileError for a folder it names
            key = "vllm_omni.base_deploy_config"
            where = tree.locations.get(key, fallback)
            raise ProfileError(f"--set {key}: {exc}" if where == "--set" else f"{where}: {key}: {exc}") from None

    origins = {key: tree.origins.get(key, "default") for key in leaf_keys()}
    return ResolvedProfile(profile=profile, name=name, source=path, platform=chosen, origins=origins)
