"""Checks on a model folder before any library reads it: no code from the folder, files that parse.

A model folder is data the user got from somewhere. transformers runs Python
from the folder when a config names it in `auto_map` and the caller trusts
remote code (it asks `[y/N]` on stdin when the caller does not say), so every
loader in omni passes `trust_remote_code=False` and refuses such a folder first,
with the reason. Damaged files are named here too, instead of surfacing as a
`MemoryError` or a parse error without a file name from deep inside a loader:
JSON that does not parse, a safetensors header whose sizes cannot be true.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator
from pathlib import Path

from omnicli.errors import UsageError

# The files in which transformers looks for `auto_map` (code it would import from the folder).
CONFIG_FILES = (
    "config.json", "tokenizer_config.json", "preprocessor_config.json", "feature_extractor_config.json",
    "processor_config.json", "generation_config.json", "video_preprocessor_config.json",
)
JSON_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json",
              "generation_config.json", "model.safetensors.index.json")
SAFETENSORS_HEADER_LIMIT = 100 << 20  # the safetensors format's own limit on its JSON header
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


class ModelFileError(UsageError, ValueError):
    """A model folder omni will not load: it asks to run its own code, or a file is damaged.
    Bad input (exit 2); the message names the file and the reason."""


def read_json(path: Path) -> object:
    """A JSON file's value, or ModelFileError naming file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{path}: not UTF-8 text (byte {exc.start}); the file is damaged") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); the file is damaged or cut short"
        ) from None


def refuse_remote_code(folder: Path) -> None:
    """ModelFileError when a config in `folder` names Python code for transformers to run."""
    for name in CONFIG_FILES:
        path = folder / name
        if not path.is_file():
            continue
        value = read_json(path)
        auto_map = value.get("auto_map") if isinstance(value, dict) else None
        if auto_map:
            targets = ", ".join(sorted({str(t) for t in _flatten(auto_map)}))
            raise ModelFileError(
                f"{path}: refusing this model folder: its auto_map names Python code ({targets}) that transformers "
                "would run, and omni never runs code from a model folder (trust_remote_code=False); use a "
                "checkpoint without custom code, or remove auto_map if the classes are transformers' own"
            )


def check_safetensors(path: Path) -> None:
    """ModelFileError when a safetensors file's header cannot describe the file (read: the header only)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelFileError(f"{path}: {size} bytes, too short for a safetensors file (cut short?)")
        (length,) = struct.unpack("<Q", head)
        if length > min(SAFETENSORS_HEADER_LIMIT, size - 8):
            raise ModelFileError(
                f"{path}: the safetensors header claims {length} bytes, but the file holds {size - 8} after the "
                f"length field (limit {SAFETENSORS_HEADER_LIMIT}); the file is damaged or not safetensors"
            )
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: the safetensors header is not valid JSON ({exc}); the file is damaged") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: the safetensors header is not a JSON object; the file is damaged")
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(entry, data)
        if problem:
            raise ModelFileError(f"{path}: tensor {name!r}: {problem}; the file is damaged")


def _tensor_problem(entry: object, data_bytes: int) -> str | None:
    if not isinstance(entry, dict):
        return "its header entry is not an object"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _DTYPE_BYTES:
        return f"unknown dtype {dtype!r}"
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        return f"bad shape {shape!r}"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        return f"bad data_offsets {offsets!r}"
    begin, end = offsets
    if not 0 <= begin <= end <= data_bytes:
        return f"data_offsets {offsets} lie outside the {data_bytes} bytes of data the file holds"
    if end - begin != math.prod(shape) * _DTYPE_BYTES[dtype]:
        return f"shape {shape} of {dtype} does not fit data_offsets {offsets}"
    return None


def check_model_folder(folder: Path, *, allow_remote_code: bool = False) -> None:
    """Everything above for one checkpoint folder: no remote code (unless the profile consented, see
    Family.remote_code_option), JSON that parses, sane safetensors headers."""
    if not allow_remote_code:
        refuse_remote_code(folder)
    for name in JSON_FILES:
        if (folder / name).is_file():
            read_json(folder / name)
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)


def _flatten(value: object) -> Iterator[object]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _flatten(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _flatten(v)
    elif value is not None:
        yield value
