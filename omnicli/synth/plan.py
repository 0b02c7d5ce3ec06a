"""What a synth run finds in OUT and what it has to do: the lock, the resume plan, the tidy-up.

Resumable: `results.jsonl` holds one row per finished utterance, appended as
each finishes. A re-run skips utterances whose row is `ok`, whose wav is
intact and whose input did not change (and, unless asked to retry, those
that failed). Every file is written atomically, so an interrupted run, even
one killed with SIGKILL, never leaves a torn wav or line.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from omnicli.atomic import jsonl_lines, write_bytes_atomic
from omnicli.audio import wav_frames
from omnicli.errors import UsageError
from omnicli.manifest import Manifest, ManifestRow
from omnicli.synth.results import Status, SynthResult

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
LOCK = ".omni-synth.lock"
# omnicli.atomic's temp files (mkstemp: ".<name>.<8 random chars>.tmp") for the files synth writes.
_OUR_TEMP_FILE = re.compile(r"^\.(.+\.wav|results\.jsonl|summary\.json)\.[a-z0-9_]{8}\.tmp$")


@dataclass
class SynthPlan:
    todo: list[ManifestRow]
    done: list[str]  # utts already finished in OUT
    failed_before: list[str]  # utts that failed earlier and are not retried
    changed: list[str] = field(default_factory=list)  # finished earlier from a different input: redone
    undigested: list[str] = field(default_factory=list)  # finished earlier, no input digest to check it by: redone
    other_profiles: set[str] = field(default_factory=set)  # digests of earlier rows made with another profile


class OutputBusy(UsageError, RuntimeError):
    """Another run is writing into the same output folder."""


class OutputLock:
    """An exclusive lock on OUT for one run (released by the OS even on SIGKILL)."""

    def __init__(self, out_dir: Path):
        out_dir.mkdir(parents=True, exist_ok=True)
        self._f = open(out_dir / LOCK, "a+")
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise OutputBusy(f"{out_dir} is in use by another omni synth run") from None

    def release(self) -> None:
        if not self._f.closed:
            fcntl.flock(self._f, fcntl.LOCK_UN)
            self._f.close()

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def utterance_seed(base_seed: int, utt: str) -> int:
    """A per-utterance seed that does not depend on order, so resumed runs match."""
    return (base_seed * 1_000_003 + zlib.crc32(utt.encode("utf-8"))) % (2**31)


def input_digest(row: ManifestRow) -> str:
    """Identifies what a row asks for (text, reference, voice), to notice edited manifests.

    The reference counts by its path relative to the manifest, so a data set
    moved together with its manifest is not redone. The voice is appended
    only when the row names one, so rows without a voice keep the digests
    earlier versions wrote (their results are not redone); the instruction likewise.
    """
    ref = ""
    if row.prompt_wav is not None:
        ref = os.path.relpath(row.prompt_wav, row.source.parent) if row.source is not None else str(row.prompt_wav)
    parts = [row.text, row.prompt_text, ref] + ([row.voice] if row.voice else [])
    parts += [f"instruct:{row.instruct}"] if row.instruct else []
    key = "\x1f".join(parts)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def latest_result_lines(out_dir: Path) -> dict[str, bytes]:
    """The latest results row of each utterance that validates, as its line (later rows
    win; a row that does not validate counts as absent, so its utterance is redone).

    Lines rather than models: one pass over 200,000 rows, ~80 MB instead of ~400 MB.
    """
    latest: dict[str, bytes] = {}
    for line in jsonl_lines(out_dir / RESULTS):
        try:
            row = SynthResult.model_validate_json(line)
        except ValidationError:
            continue  # damaged by hand or by another tool, NaN or absurd numbers: redone
        latest[row.utt] = line
    return latest


def last_results(out_dir: Path) -> dict[str, SynthResult]:
    """The latest results row of each utterance (see `latest_result_lines`), typed."""
    return {utt: SynthResult.model_validate_json(line) for utt, line in latest_result_lines(out_dir).items()}


def wav_matches(path: Path, audio_seconds: float | None) -> bool:
    """True when `path` is a whole wav of the recorded length (not damaged since)."""
    shape = wav_frames(path)  # None also for a wav cut short, which sf.info would read as shorter
    if shape is None:
        return False
    if audio_seconds is None:
        return True
    frames, rate = shape
    try:
        return abs(frames - round(float(audio_seconds) * rate)) <= 1
    except (ValueError, OverflowError):  # NaN or infinite: no run wrote that
        return False


def plan_run(
    manifest: Manifest, out_dir: Path, *, retry_failed: bool = False, profile_digest: str | None = None,
) -> SynthPlan:
    """Which rows of `manifest` (already cut by --limit and --shard) OUT still needs."""
    previous = latest_result_lines(out_dir)
    plan = SynthPlan([], [], [])
    for row in manifest.rows:
        line = previous.get(row.utt)
        prev = SynthResult.model_validate_json(line) if line is not None else None
        if prev and prev.input_digest != input_digest(row):
            # Changed in the manifest, or no digest to tell (an older or hand-edited row): redone.
            (plan.changed if prev.input_digest else plan.undigested).append(row.utt)
            plan.todo.append(row)
        elif prev and prev.status == Status.OK and wav_matches(out_dir / f"{row.utt}.wav", prev.audio_seconds):
            plan.done.append(row.utt)
        elif prev and prev.status == Status.FAILED and not retry_failed:
            plan.failed_before.append(row.utt)
        else:
            plan.todo.append(row)
        if prev and profile_digest and prev.profile_digest not in ("", profile_digest):
            plan.other_profiles.add(prev.profile_digest)
    return plan


def tidy_out_dir(out_dir: Path) -> int:
    """Removes temp files left by a killed run and rewrites results.jsonl with one row per
    utterance (its latest). Call only while holding the OutputLock. Returns files removed.

    A torn last line (a crash mid-write) is cut off first, in place: that needs no
    free space, so the file is valid JSONL again even on a full disk. The rewrite
    that follows (duplicates, damaged lines) raises OSError when it cannot be written.
    """
    removed = 0
    if not out_dir.is_dir():
        return 0
    for tmp in out_dir.glob(".*.tmp"):
        if _OUR_TEMP_FILE.match(tmp.name):
            tmp.unlink(missing_ok=True)
            removed += 1
    results = out_dir / RESULTS
    if results.exists():
        cut_torn_tail(results)
        compact_results(out_dir)
    return removed


def compact_results(out_dir: Path) -> None:
    """Rewrites results.jsonl with one row per utterance, its latest (duplicates left by redone
    rows, damaged lines dropped); untouched when it has none. OSError when it cannot be written."""
    results = out_dir / RESULTS
    if not results.exists():
        return
    data = b"".join(latest_result_lines(out_dir).values())
    if results.read_bytes() != data:
        write_bytes_atomic(results, data)


def cut_torn_tail(path: Path) -> bool:
    """Truncates `path` after its last newline; True when there was a torn line to cut."""
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        end = size
        while end > 0:  # look back for the last newline, a block at a time
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            if block.endswith(b"\n") and end == size:
                return False
            newline = block.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        f.truncate(end)
        f.flush()
        os.fsync(f.fileno())
        return True
