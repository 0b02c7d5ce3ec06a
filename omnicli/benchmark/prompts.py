"""Benchmark prompts: manifest rows chosen, shuffled, cycled and turned into requests."""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnicli.datasets import demo_manifest_path
from omnicli.driver.inputs import InputError, request_from_row
from omnicli.driver.records import Prompt
from omnicli.engine.request import TTSRequest
from omnicli.manifest import ManifestRow, read_manifest

DEMO_NUM_PROMPTS = 32  # the demo set has few rows: cycle it to a useful load


class Cycled(Sequence[Prompt]):
    """`count` prompts cycling through `distinct`, in its order, made on access: a pass of
    a million requests over a 100-row manifest holds 100 prompts, not a million."""

    def __init__(self, distinct: Sequence[Prompt], count: int):
        self.distinct = list(distinct)
        self.total = count if self.distinct else 0

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.total))]
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(index)
        return self.distinct[index % len(self.distinct)]


@dataclass
class PromptSet:
    source: Path
    prompts: Sequence[Prompt]  # a `Cycled` view: cycling is not materialized
    errors: list[str]  # every row that could not be used, as `file:line: reason`
    num_rows: int  # usable rows before cycling


def select_rows(rows: Sequence[ManifestRow], num_prompts: int | None, seed: int, shuffle: bool) -> list[ManifestRow]:
    """Shuffles (with `seed`) unless told not to, then cycles to `num_prompts` rows."""
    order = list(rows)
    if not order:
        return []
    if shuffle:
        random.Random(seed).shuffle(order)
    n = len(order) if num_prompts is None else num_prompts
    return [order[i % len(order)] for i in range(n)]


def with_defaults(request: TTSRequest, defaults: Mapping[str, Any]) -> TTSRequest:
    """`request` with each of `defaults` (TTSRequest fields) where the row left the field unset or empty."""
    unset = {key: value for key, value in defaults.items() if getattr(request, key) in (None, "")}
    return dataclasses.replace(request, **unset) if unset else request


def load_prompts(
    manifest: str | os.PathLike | None,
    *,
    num_prompts: int | None = None,
    seed: int = 0,
    shuffle: bool = True,
    max_new_tokens: int | None = None,
    allow_outside_paths: bool = False,
    dataset: str | None = None,
    request_fields: Mapping[str, Any] | None = None,
) -> PromptSet:
    """Reads the manifest (the shipped demo set when None) and builds one request per prompt.

    Reference audio is loaded once per distinct row, before any timing. `dataset`: vLLM-Omni's
    seed-tts-text / seed-tts-design reading of the file (omnicli.benchmark.seed_tts_sets).
    `request_fields` (--extra-body): defaults of every request; a row's own value wins.
    Raises `omnicli.manifest.ManifestError` when the manifest cannot be read.
    """
    if manifest is None:
        path = demo_manifest_path()
        if num_prompts is None:
            num_prompts = DEMO_NUM_PROMPTS
    else:
        path = Path(manifest)
    if dataset in ("seed-tts-text", "seed-tts-design"):  # vLLM-Omni's CustomVoice / VoiceDesign rows
        from omnicli.benchmark.seed_tts_sets import read_seed_tts_set

        parsed = read_seed_tts_set(path, dataset, allow_outside_paths=allow_outside_paths)
    else:
        parsed = read_manifest(path, allow_outside_paths=allow_outside_paths)
    errors = [str(e) for e in parsed.errors]
    usable: list[ManifestRow] = []
    built = {}
    for row in parsed.rows:
        try:
            built[row.utt] = with_defaults(request_from_row(row, max_new_tokens=max_new_tokens), request_fields or {})
        except InputError as exc:  # a bad reference; the message names file and line
            errors.append(str(exc))
            continue
        usable.append(row)
    order = select_rows(usable, None, seed, shuffle)  # shuffled once; the pass cycles through it
    distinct = [
        Prompt(r.utt, built[r.utt], str(r.prompt_wav) if r.prompt_wav else None, text=r.text, row=r) for r in order
    ]
    prompts = Cycled(distinct, len(distinct) if num_prompts is None else num_prompts)
    return PromptSet(source=path, prompts=prompts, errors=errors, num_rows=len(usable))
