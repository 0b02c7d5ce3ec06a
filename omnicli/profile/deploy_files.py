"""vLLM-Omni deploy YAMLs named by a profile, read as the untrusted input they are.

`vllm_omni.base_deploy_config` names a packaged deploy file or any YAML on
disk, which may name another through `base_config:`. Each file of that chain
is read like a profile: a regular file within a size bound
(omnicli.runtime.files), parsed by the bounded safe loader (no tags, no alias
bombs, no deep nesting), a mapping at the top, the chain linear and bounded
(no cycles). Any problem is a `DeployFileError` (exit 2) naming the file and
line, at `omni profiles validate` time and before any engine starts.

A deploy file outside vLLM-Omni's own `deploy/` folder is someone else's
file: it may not name Python code (`*_cls`, `*_func`, module paths, a
stage's `env`), and every folder it names (`hf_config_path`, `tokenizer`,
`*_path`, `*_dir`) is checked with omnicli.model_files (no `auto_map` code).
The overlay omni writes over it sets `trust_remote_code: false` in any case.
Nothing here imports vllm_omni: the packaged folder is found on disk.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from omnicli.errors import UsageError
from omnicli.profile.errors import show_path
from omnicli.profile.safe_yaml import YamlShapeError, load_checked
from omnicli.runtime.files import UserFileError, read_user_text

MAX_DEPLOY_BYTES = 1 << 20  # packaged deploy files are a few KiB
MAX_CHAIN = 32  # files in one base_config chain (profiles and deploy files alike)

# Keys that name Python for vLLM / vLLM-Omni to import, or a process environment (PYTHONPATH, LD_PRELOAD).
_CODE_KEY = re.compile(r"(^env$|_cls$|_class$|_func$|_function$|module_path$|^kv_transfer_config$)")
# Keys that name a folder or file vLLM reads (a config, a tokenizer, weights).
_PATH_KEY = re.compile(r"(^hf_config_path$|^tokenizer$|^model$|_path$|_dir$)")


class DeployFileError(UsageError):
    """A deploy YAML that cannot be used: unreadable, malformed, a cycle, or naming code. Names the file."""

    headline = "deploy config error"


@dataclass(frozen=True)
class DeployFile:
    path: Path
    data: dict  # the file's mapping, `base_config` included
    lines: dict[str, int]  # dotted key -> 1-based line


def packaged_deploy_dir() -> Path:
    """vLLM-Omni's `deploy/` folder, found without importing the package."""
    spec = importlib.util.find_spec("vllm_omni")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("vllm_omni is not installed: pip install 'omnicli[vllm-omni]'")
    return Path(next(iter(spec.submodule_search_locations))) / "deploy"


def deploy_path(name: str) -> Path:
    """A `base_deploy_config` value as a path: a packaged file's name (`.yaml` optional) or a path."""
    path = Path(name).expanduser()
    if path.is_absolute() or "/" in name:
        return path.resolve()
    if not name.endswith((".yaml", ".yml")):
        name += ".yaml"
    return packaged_deploy_dir() / name


def _is_packaged(path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(packaged_deploy_dir().resolve())
    except (FileNotFoundError, OSError):
        return False


def _lines(node: yaml.Node | None, prefix: str, out: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = prefix + str(key_node.value)
            out.setdefault(key, key_node.start_mark.line + 1)
            _lines(value_node, key + ".", out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, f"{prefix}{i}.", out)


def read_deploy_file(path: Path) -> DeployFile:
    """One deploy YAML: a regular file within the bound, safe YAML, a mapping at the top."""
    shown = show_path(path)
    try:
        text = read_user_text(path, max_bytes=MAX_DEPLOY_BYTES)
    except UserFileError as exc:
        raise DeployFileError(f"{shown}: cannot read this deploy config: {exc.reason}") from None
    try:
        node, data = load_checked(text)
    except YamlShapeError as exc:
        raise DeployFileError(f"{shown}:{exc.line}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{shown}:{mark.line + 1}" if mark else shown
        raise DeployFileError(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DeployFileError(f"{shown}:1: a deploy config must be a mapping at the top (got {type(data).__name__})")
    lines: dict[str, int] = {}
    _lines(node, "", lines)
    return DeployFile(path, data, lines)


def read_deploy_chain(path: Path) -> list[DeployFile]:
    """`path` and the files its `base_config:` chain names (relative to the naming file's folder), top first.
    Read one by one (linear), at most MAX_CHAIN files, each once."""
    chain: list[DeployFile] = []
    seen: set[Path] = set()
    current = path
    while True:
        resolved = current.resolve()
        seen.add(resolved)
        deploy = read_deploy_file(current)
        chain.append(deploy)
        base = deploy.data.get("base_config")
        if base is None:
            return chain
        where = f"{show_path(current)}:{deploy.lines.get('base_config', 1)}"
        if not isinstance(base, str) or not base.strip():
            raise DeployFileError(f"{where}: base_config: must be a path to a YAML file (got {base!r})")
        nxt = Path(base).expanduser()
        if not nxt.is_absolute():
            nxt = current.parent / nxt
        if nxt.resolve() in seen:
            shown = " -> ".join(show_path(d.path) for d in chain)
            raise DeployFileError(f"{where}: base_config: cycle: {shown} -> {show_path(nxt)}")
        if len(chain) >= MAX_CHAIN:
            raise DeployFileError(f"{where}: base_config: a chain of more than {MAX_CHAIN} deploy files "
                                  f"(from {show_path(path)}); flatten it")
        current = nxt


def read_deploy(path: Path) -> dict:
    """A deploy YAML with its own `base_config` chain folded in by vLLM-Omni's rules (`fold_deploy`), so
    what omni reads of it (connectors, platforms, stages) is what vLLM-Omni will run. DeployFileError for
    any bad file, ModelFileError for a folder it names that holds code."""
    chain = read_deploy_chain(path)
    for deploy in chain:
        check_user_deploy(deploy)
    merged = {k: v for k, v in chain[-1].data.items() if k != "base_config"}
    for deploy in reversed(chain[:-1]):
        merged = fold_deploy(merged, {k: v for k, v in deploy.data.items() if k != "base_config"})
    return copy.deepcopy(merged)


# What vLLM-Omni (config/stage_config.py, resolve_deploy_yaml) merges key by key when a deploy file names a
# base_config; every other key of the file replaces the base's whole. tests/test_dropin_deploy_parity.py
# checks the result against vLLM-Omni's own on every packaged file that names a base.
_TOP_LEVEL_MERGED = frozenset({"speech_cache"})
_STAGE_MERGED = frozenset({"default_sampling_params", "default_pooling_params", "subtalker_sampling_params",
                           "engine_extras", "engine_args"})


def fold_deploy(base: dict, over: dict) -> dict:
    """`over` (a deploy file) over `base` (its base_config, already folded): top-level keys replaced but
    `speech_cache`; `connectors` merged recursively; `stages` by stage_id; `platforms` per platform
    (its keys replaced, its stages by stage_id)."""
    merged = _merge_selected(base, {k: v for k, v in over.items() if k not in ("connectors", "stages", "platforms")},
                             _TOP_LEVEL_MERGED)
    if base.get("connectors") or over.get("connectors"):
        merged["connectors"] = _merge_mappings(base.get("connectors") or {}, over.get("connectors") or {})
    merged["stages"] = _merge_stages(base.get("stages"), over.get("stages"))
    if base.get("platforms") or over.get("platforms"):
        base_p, over_p = base.get("platforms") or {}, over.get("platforms") or {}
        merged["platforms"] = {}
        for name in {**base_p, **over_p}:
            b, o = base_p.get(name) or {}, over_p.get(name) or {}
            merged["platforms"][name] = {**b, **{k: v for k, v in o.items() if k != "stages"},
                                         "stages": _merge_stages(b.get("stages"), o.get("stages"))}
    return merged


def _merge_mappings(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge_mappings(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) \
            else value
    return out


def _merge_selected(base: dict, over: dict, keys: frozenset[str]) -> dict:
    out = {**base, **over}
    for key in keys & base.keys() & over.keys():
        if isinstance(base[key], dict) and isinstance(over[key], dict):
            out[key] = _merge_mappings(base[key], over[key])
    return out


def _merge_stages(base: list | None, over: list | None) -> list:
    by_id = {stage["stage_id"]: stage for stage in base or []}
    for stage in over or []:
        sid = stage["stage_id"]
        by_id[sid] = _merge_selected(by_id[sid], stage, _STAGE_MERGED) if sid in by_id else stage
    return list(by_id.values())


def deep_merge(base: Any, over: Any) -> Any:
    """Mappings merged key by key; `stages:` lists merged by stage_id (as vLLM-Omni merges them)."""
    if _is_stage_list(base) and _is_stage_list(over):
        by_id = {s["stage_id"]: s for s in base}
        for stage in over:
            by_id[stage["stage_id"]] = deep_merge(by_id.get(stage["stage_id"]), stage)
        return list(by_id.values())
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return copy.deepcopy(over)
    out = dict(base)
    for key, value in over.items():
        out[key] = deep_merge(base.get(key), value)
    return out


def _is_stage_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(s, dict) and "stage_id" in s for s in value)


def _walk(value: Any, prefix: str):
    """(dotted key, key, value) for every mapping entry, lists by index."""
    if isinstance(value, dict):
        for key, sub in value.items():
            dotted = f"{prefix}{key}"
            yield dotted, str(key), sub
            yield from _walk(sub, dotted + ".")
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _walk(sub, f"{prefix}{i}.")


def check_user_deploy(deploy: DeployFile) -> None:
    """DeployFileError (or ModelFileError) when a deploy file that is not vLLM-Omni's own names code,
    or names a folder that holds code (`auto_map`)."""
    if _is_packaged(deploy.path):
        return
    from omnicli.model_files import refuse_remote_code

    shown = show_path(deploy.path)
    for dotted, key, value in _walk(deploy.data, ""):
        where = f"{shown}:{deploy.lines.get(dotted, 1)}"
        if _CODE_KEY.search(key) and value not in (None, {}, ""):
            raise DeployFileError(
                f"{where}: {dotted}: names Python code or a process environment for vLLM to load; omni does not "
                "run code named by a deploy file outside vLLM-Omni's own deploy folder (docs/vllm-omni.md)")
        if _PATH_KEY.search(key) and isinstance(value, str) and value:
            folder = Path(value).expanduser()
            # vLLM reads a relative path from the working folder; the file's own folder is checked too.
            for candidate in {folder, deploy.path.parent / folder}:
                if candidate.is_dir():
                    refuse_remote_code(candidate)  # ModelFileError (exit 2): the folder's auto_map names code


def check_deploy_config(name: str) -> list[DeployFile]:
    """Reads and checks `vllm_omni.base_deploy_config` and its chain (DeployFileError / ModelFileError).
    A packaged name without vLLM-Omni installed is left to the engine, which says how to install it."""
    try:
        path = deploy_path(name)
    except FileNotFoundError:
        return []
    chain = read_deploy_chain(path)
    for deploy in chain:
        check_user_deploy(deploy)
    return chain
