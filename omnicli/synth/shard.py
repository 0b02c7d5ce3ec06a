"""`omni synth --shard I/N`: which manifest rows one of N independent runs owns.

A row belongs to shard `sha256(utt) mod N`. The hash depends on the
utterance id alone (not on Python's per-process salted `hash()`, nor on the
row's position), so every machine of a Slurm array or a Kubernetes indexed
job agrees on the split without talking to the others, a resume finds the
same rows, and inserting rows into the manifest moves no finished row to
another shard.

An invalid row is reported only by the shard that owns it (by its utterance
id, or by its line number when the id itself could not be read), so across
the N shards each bad row is reported, and counted, exactly once.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from omnicli.atomic import iter_jsonl
from omnicli.errors import UsageError
from omnicli.manifest import Manifest, RowError

# omnicli.synth.plan.SUMMARY and RESULTS; not imported from there, so that `omni --help`
# (which builds the --shard option's parser) does not load the synthesis modules.
SUMMARY = "summary.json"
RESULTS = "results.jsonl"


_DIGITS = re.compile(r"[0-9]+")


class ShardSpecError(UsageError, ValueError):
    """A --shard value that is not `I/N` with 0 <= I < N."""


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 0-based, as SLURM_ARRAY_TASK_ID (--array=0-N) and JOB_COMPLETION_INDEX count
    count: int

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        index_text, slash, count_text = text.strip().partition("/")
        if not slash:
            raise ShardSpecError(f"{text!r} is not I/N (shard I of N, counting from 0, e.g. 0/4)")
        # ASCII digits only: int() would also read "1_0" as 10, "+1", and digits of other scripts.
        if not (_DIGITS.fullmatch(index_text) and _DIGITS.fullmatch(count_text)):
            raise ShardSpecError(
                f"{text!r}: I and N must be whole numbers written with the digits 0-9 (shard I of N, e.g. 0/4)"
            )
        index, count = int(index_text), int(count_text)
        if count < 1:
            raise ShardSpecError(f"{text!r}: N must be at least 1")
        if not 0 <= index < count:
            raise ShardSpecError(f"{text!r}: I counts from 0, so it must lie in 0..{count - 1}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, key: str) -> bool:
        return shard_of(key, self.count) == self.index


def shard_of(utt: str, count: int) -> int:
    """The shard (0..count-1) that owns utterance `utt`: the same in every process and on every machine."""
    digest = hashlib.sha256(utt.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def error_key(error: RowError) -> str:
    """What decides the owner of an invalid row: its utt when it was read, else its line."""
    return error.utt if error.utt else f"\x00line {error.line_no}"  # NUL: never part of a valid utt


def select_shard(manifest: Manifest, spec: ShardSpec | None) -> Manifest:
    """The rows (and invalid rows) of `manifest` that shard `spec` owns; all of them for None."""
    if spec is None:
        return manifest
    return Manifest(
        manifest.path,
        [row for row in manifest.rows if spec.owns(row.utt)],
        [error for error in manifest.errors if spec.owns(error_key(error))],
    )


def split_manifest(manifest: Manifest, count: int) -> list[Manifest]:
    """Every shard's rows (and invalid rows) of `manifest` at once: one hash per row, however
    many shards (select_shard per shard would hash every row N times)."""
    rows: list[list] = [[] for _ in range(count)]
    errors: list[list] = [[] for _ in range(count)]
    for row in manifest.rows:
        rows[shard_of(row.utt, count)].append(row)
    for error in manifest.errors:
        errors[shard_of(error_key(error), count)].append(error)
    return [Manifest(manifest.path, r, e) for r, e in zip(rows, errors)]


def recorded_shard(out_dir: Path) -> tuple[bool, str | None]:
    """(whether OUT has a readable summary.json, the shard it records: "I/N" or None)."""
    try:
        summary = json.loads((out_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or damaged: the run rewrites it
        return False, None
    if not isinstance(summary, dict):
        return False, None
    shard = summary.get("shard")
    return True, shard if isinstance(shard, str) else None


def shard_conflict(out_dir: Path, spec: ShardSpec | None) -> str | None:
    """Why a run with `spec` must not write into OUT, or None when it may.

    A folder belongs to one shard spec for life: resuming it with another
    spec would mix rows of two splits, and a merge could count a row twice.
    """
    known, recorded = recorded_shard(out_dir)
    wanted = str(spec) if spec is not None else None
    if not known or recorded == wanted:
        return None
    if recorded is None:
        return (f"{out_dir} holds a whole run (or a merge of shards), not shard {wanted}: "
                "give each shard a folder of its own (e.g. --out out/shard-I)")
    if wanted is None:
        return (f"{out_dir} holds shard {recorded}: resume it with --shard {recorded}, "
                "or combine the shard folders with `omni synth-merge`")
    assert spec is not None  # `wanted` is None otherwise
    return (f"{out_dir} holds shard {recorded}, not {wanted}: give each shard a folder of its own "
            f"(e.g. --out out/shard-{spec.index}), or resume this one with --shard {recorded}")


def foreign_rows(out_dir: Path, spec: ShardSpec | None) -> int:
    """How many results rows in OUT belong to other shards (copied in by hand, or left
    by a run that was killed before its first summary). They are never counted."""
    if spec is None:
        return 0
    utts = {row.get("utt") for row in iter_jsonl(out_dir / RESULTS)}
    return sum(1 for utt in utts if isinstance(utt, str) and not spec.owns(utt))
