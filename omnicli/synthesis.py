"""Batch synthesis: manifest rows -> engine -> OUT/<utt>.wav + results.jsonl + summary.json.

Resumable: `results.jsonl` holds one row per finished utterance, appended as
each finishes. A re-run skips utterances whose row is `ok`, whose wav is
intact and whose input did not change (and, unless asked to retry, those
that failed). Every file is written atomically, so an interrupted run, even
one killed with SIGKILL, never leaves a torn wav or line.

A request that fails is recorded as failed; when the engine itself fails
(a stage died or stopped responding) the requests it took down are left
pending instead, so that a resume retries them. The same holds when OUT
cannot be written (disk full, I/O error): that is not a property of the
utterance, so the run stops admitting rows and leaves the rest pending.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import fcntl
import hashlib
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from omnicli import __version__
from omnicli.atomic import JsonlAppender, jsonl_lines, write_bytes_atomic, write_json_atomic
from omnicli.audio import wav_frames, write_wav_atomic
from omnicli.driver import STOP_GRACE_S, LoadShape, Prompt, RequestRecord, drive
from omnicli.driver.inputs import request_from_row
from omnicli.engine.request import EngineLike
from omnicli.errors import OutputError, UsageError
from omnicli.manifest import Manifest, ManifestRow
from omnicli.retention import Retainer, judge_audio, request_meta
from omnicli.synth_results import FailedRow, RetentionTotals, Status, SynthResult, SynthSummary, ThisRun

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

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


# OSErrors that belong to one output file's name rather than to the folder or its disk.
_ONE_FILE_ERRNOS = frozenset({errno.EISDIR, errno.ENAMETOOLONG})


def is_output_fault(exc: OSError) -> bool:
    """True when writing into OUT failed for a reason every later write shares (disk
    full, quota, read-only, I/O error, folder gone), not one file's own problem."""
    return exc.errno not in _ONE_FILE_ERRNOS


class OutputUnwritable(OutputError, OSError):
    """OUT cannot be written (disk full, I/O error): the run stops, the rest stays pending."""


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
    parts = [row.text, row.prompt_text, ref] + ([row.voice] if row.voice else []) + ([f"instruct:{row.instruct}"] if row.instruct else [])
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
    manifest: Manifest,
    out_dir: Path,
    *,
    limit: int | None = None,
    retry_failed: bool = False,
    profile_digest: str | None = None,
) -> SynthPlan:
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    previous = latest_result_lines(out_dir)
    plan = SynthPlan([], [], [])
    for row in rows:
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
        data = b"".join(latest_result_lines(out_dir).values())
        if results.read_bytes() != data:  # duplicates or damaged lines
            write_bytes_atomic(results, data)
    return removed


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


class RowSink:
    """The work one synthesized row needs, wherever its engine runs: the request a row
    becomes (its per-utterance seed) and, once the engine answered, the judging, the
    atomic OUT/<utt>.wav, the retained audio and the results row. `SynthRun` uses it
    for a local run; each Ray actor of `omni synth --ray` has its own (same OUT)."""

    def __init__(self, out_dir: Path, resolved: ResolvedProfile, *, max_new_tokens: int | None = None, retainer: Retainer | None = None):
        self.out_dir = out_dir
        self.resolved = resolved
        self.max_new_tokens = max_new_tokens
        self.retainer = retainer

    def prompt(self, row: ManifestRow) -> Prompt:
        seed = utterance_seed(self.resolved.profile.seed, row.utt)
        return Prompt(
            row.utt,
            reference=str(row.prompt_wav) if row.prompt_wav else None,
            load=lambda: request_from_row(row, max_new_tokens=self.max_new_tokens, seed=seed),
            text=row.text,
            item=row,
        )

    def finish(self, record: RequestRecord) -> SynthResult:
        """One finished request -> its wav (when ok), retained audio (when suspect) and results row."""
        row: ManifestRow = record.prompt.item
        result = SynthResult(
            utt=row.utt,
            status=Status.FAILED,
            line=row.line_no,
            input_digest=input_digest(row),
            profile_digest=self.resolved.digest,
            error=record.error,
        )
        if record.rejected:  # its input never became a request: nothing to judge or keep
            result.finished_at = _now()
            return result
        pcm, sr = record.pcm, record.sample_rate
        result.audio_seconds = len(pcm) / sr
        result.ttfp_s = record.audio_ttfp
        result.e2el_s = record.chunk_times[-1] - record.start if record.chunk_times else None
        if record.info is not None:
            result.finish_reason, result.ref_cache = record.info.finish_reason, record.info.ref_cache
        if result.e2el_s and result.audio_seconds:
            result.rtf = result.e2el_s / result.audio_seconds
        error = record.error
        result.flags = judge_audio(
            pcm, sr, text=row.text, finish_reason=None if error else result.finish_reason, error=error, thresholds=self.resolved.profile.retention
        )
        if error is None and len(pcm) == 0:
            error = "the engine returned no audio"
        if error is None:
            try:
                write_wav_atomic(self.out_dir / f"{row.utt}.wav", pcm, sr)
                result.status, result.wav = Status.OK, f"{row.utt}.wav"
            except OSError as exc:
                if is_output_fault(exc):  # every later row would fail the same way
                    raise OutputUnwritable(f"cannot write {self.out_dir / (row.utt + '.wav')}: {exc}") from exc
                error = f"could not write {self.out_dir / (row.utt + '.wav')}: {exc}"
        result.error = error
        if self.retainer is not None and result.flags:
            errors_before = self.retainer.errors
            meta = request_meta(
                record, command="synth", profile_digest=self.resolved.digest,
                output_wav=self.out_dir / result.wav if result.wav else None, status=result.status, error=result.error,
            )
            kept = self.retainer.keep(pcm, sr, result.flags, meta)
            result.retained = str(kept) if kept else None
            if self.retainer.errors > errors_before:
                result.retention_error = self.retainer.error_messages[-1]
        result.finished_at = _now()
        return result


class SynthRun:
    """Synthesizes planned rows with `concurrency` requests in flight: plan -> drive -> sink.

    The request driver (`omnicli.driver.drive`) runs the rows through the
    engine; each record it yields is sunk here: judged, written atomically
    as OUT/<utt>.wav, retained when suspect, and appended to results.jsonl.
    `stop` (an asyncio.Event; set it on the run's loop) stops admitting
    rows; requests in flight then get `grace_s` to finish before they are
    cancelled and left pending. When the engine fails as a whole, the run
    stops at once and `engine_error` says why. When OUT cannot be written
    (disk full, I/O error), `output_error` says so and the run stops like
    on `stop`; the row that hit it, and every row not written, stays pending.
    """

    def __init__(
        self,
        engine: EngineLike,
        out_dir: Path,
        *,
        resolved: ResolvedProfile | None = None,  # the profile the engine runs (default: engine.resolved)
        concurrency: int = 8,
        max_new_tokens: int | None = None,
        retainer: Retainer | None = None,
        on_result: Callable[[SynthResult], None] | None = None,
        grace_s: float = STOP_GRACE_S,
    ):
        self.engine = engine
        self.resolved = resolved if resolved is not None else engine.resolved
        self.out_dir = out_dir
        self.concurrency = max(1, concurrency)
        self.on_result = on_result or (lambda _result: None)
        self.grace_s = grace_s
        self.stop = asyncio.Event()  # Ctrl-C, SIGTERM: no new rows
        self.results: list[SynthResult] = []
        self.engine_error: str | None = None
        self.output_error: str | None = None  # OUT could not be written: disk full, I/O error
        self.left_pending: list[str] = []  # in flight when stopped, taken down by an engine failure, or not written
        self.wall_seconds = 0.0
        self._unwritten: list[str] = []  # finished after OUT failed: nothing recorded, redone by a re-run
        self.sink = RowSink(out_dir, self.resolved, max_new_tokens=max_new_tokens, retainer=retainer)

    async def run(self, rows: list[ManifestRow]) -> list[SynthResult]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tidy_out_dir(self.out_dir)
        try:
            with JsonlAppender(self.out_dir / RESULTS) as results:
                await self.drive_rows(rows, keep=lambda result: results.append(result.model_dump(mode="json")))
        finally:
            tidy_out_dir(self.out_dir)
        return self.results

    async def drive_rows(self, rows: list[ManifestRow], keep: Callable[[SynthResult], None] | None = None) -> list[SynthResult]:
        """Runs `rows` through the engine; each result goes to `keep` (after its wav is in
        place), then to `results` and `on_result`. `run` keeps them in results.jsonl; a Ray
        actor (`omnicli.scaleout.ray_synth`) hands them to the driver, the only writer of it.
        An OSError from `keep` stops the run like an unwritable OUT."""

        def sink(record: RequestRecord) -> None:
            if self.output_error is None:
                try:
                    result = self.sink.finish(record)
                    if keep is not None:
                        keep(result)  # after the wav is in place; whole or absent
                except OSError as exc:  # not this utterance's fault: stop, leave it pending
                    self._output_failed(str(exc) if isinstance(exc, OutputUnwritable) else f"cannot write {self.out_dir / RESULTS}: {exc}")
                else:
                    self.results.append(result)
                    self.on_result(result)
                    return
            self._unwritten.append(record.utt)

        # Prompts made as rows are admitted, records dropped once sunk: what the run holds
        # does not grow with the manifest (only the small results rows do).
        driven = await drive(
            self.engine, (self.sink.prompt(row) for row in rows), LoadShape(concurrency=self.concurrency),
            keep_pcm=True, keep_records=False, on_record=sink, stop=self.stop, grace_s=self.grace_s,
        )
        self.engine_error = driven.engine_error
        self.left_pending = driven.left_pending + self._unwritten
        self.wall_seconds = driven.wall_seconds
        return self.results

    def _output_failed(self, message: str) -> None:
        self.output_error = message
        self.stop.set()  # nothing new is submitted; requests in flight are not written

def build_synth_summary(
    manifest: Manifest,
    out_dir: Path,
    run: SynthRun | None,
    *,
    resolved,
    limit: int | None = None,
    interrupted: bool = False,
    engine_error: str | None = None,
    output_error: str | None = None,
    retainer: Retainer | None = None,
    started_at: str = "",
    shard: str | None = None,
) -> SynthSummary:
    """Totals over every manifest row, from results.jsonl (this run and earlier ones)."""
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    latest = latest_result_lines(out_dir)
    num_ok, ok_audio, failed = 0, 0.0, []
    for row in rows:
        line = latest.get(row.utt)
        result = SynthResult.model_validate_json(line) if line is not None else None
        if result is not None and result.status == Status.OK:
            num_ok += 1
            ok_audio += result.audio_seconds
        elif result is not None:
            failed.append(result)
    del latest
    this_run = list(run.results) if run else []
    run_audio = sum(r.audio_seconds for r in this_run)
    wall = run.wall_seconds if run else 0.0
    return SynthSummary(
        manifest=str(manifest.path),
        out_dir=str(out_dir),
        num_rows=len(rows),
        num_invalid_rows=len(manifest.errors),
        num_ok=num_ok,
        num_failed=len(failed),
        num_pending=len(rows) - num_ok - len(failed),
        audio_seconds=round(ok_audio, 3),
        interrupted=interrupted,
        # A stop the user asked for is not an engine error, though it may look like one
        # (vLLM aborts its requests on a terminal's Ctrl-C; a forced exit ends its start-up).
        engine_error=None if interrupted else engine_error or (run.engine_error if run else None),
        output_error=output_error,
        this_run=ThisRun(
            attempted=len(this_run),
            ok=sum(r.status == Status.OK for r in this_run),
            failed=sum(r.status == Status.FAILED for r in this_run),
            left_pending=list(run.left_pending) if run else [],
            wall_seconds=round(wall, 3),
            audio_seconds=round(run_audio, 3),
            audio_throughput=round(run_audio / wall, 4) if wall else 0.0,
        ),
        retention=None if retainer is None else RetentionTotals(dir=str(retainer.directory), kept=retainer.kept, errors=retainer.error_messages),
        invalid_rows=[str(e) for e in manifest.errors],
        limit=limit,
        shard=shard,
        failed=[FailedRow(utt=r.utt, line=r.line, error=r.error) for r in failed],
        model=str(getattr(run.engine, "model_name", resolved.profile.model)) if run else resolved.profile.model,
        profile=resolved.to_dict(),
        profile_name=resolved.name,
        profile_digest=resolved.digest,
        started_at=started_at,
        finished_at=_now(),
        omni_version=__version__,
    )


def write_summary(out_dir: Path, summary: SynthSummary) -> Path:
    return write_json_atomic(out_dir / SUMMARY, summary.model_dump(mode="json"))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
