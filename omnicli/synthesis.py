"""Batch synthesis: manifest rows -> engine -> OUT/<utt>.wav + results.jsonl + summary.json.

Resumable: `results.jsonl` holds one row per finished utterance, appended as
each finishes. A re-run skips utterances whose row is `ok`, whose wav is
intact and whose input did not change (and, unless asked to retry, those
that failed). Every file is written atomically, so an interrupted run, even
one killed with SIGKILL, never leaves a torn wav or line.

A request that fails is recorded as failed; when the engine itself fails
(a stage died or stopped responding) the requests it took down are left
pending instead, so that a resume retries them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from omnicli import __version__
from omnicli.atomic import JsonlAppender, read_jsonl, write_json_atomic, write_text_atomic
from omnicli.audio import wav_data_complete, write_wav_atomic
from omnicli.engine import Engine, RequestFailed
from omnicli.interrupts import STOP_GRACE_S  # shared with omni bench
from omnicli.manifest import Manifest, ManifestRow
from omnicli.requests import InputError, request_from_row
from omnicli.retention import Retainer, judge_audio

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
LOCK = ".omni-synth.lock"
# omnicli.atomic's temp files (mkstemp: ".<name>.<8 random chars>.tmp") for the files synth writes.
_OUR_TEMP_FILE = re.compile(r"^\.(.+\.wav|results\.jsonl|summary\.json)\.[a-z0-9_]{8}\.tmp$")


@dataclass
class UttResult:
    """One row of results.jsonl."""

    utt: str
    status: str  # "ok" or "failed"
    line: int
    wav: str | None = None
    audio_seconds: float = 0.0
    ttfp_s: float | None = None  # first audio - submission
    e2el_s: float | None = None  # last audio - submission
    rtf: float | None = None
    finish_reason: str | None = None
    ref_cache: str | None = None
    flags: list[str] = field(default_factory=list)  # suspect-audio reasons (see retention)
    error: str | None = None
    retained: str | None = None
    retention_error: str | None = None
    input_digest: str = ""  # what was synthesized; a changed manifest row is redone
    profile_digest: str = ""
    finished_at: str = ""


@dataclass
class SynthPlan:
    todo: list[ManifestRow]
    done: list[str]  # utts already finished in OUT
    failed_before: list[str]  # utts that failed earlier and are not retried
    changed: list[str] = field(default_factory=list)  # finished earlier from a different input: redone
    other_profiles: set[str] = field(default_factory=set)  # digests of earlier rows made with another profile


class OutputBusy(RuntimeError):
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

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def utterance_seed(base_seed: int, utt: str) -> int:
    """A per-utterance seed that does not depend on order, so resumed runs match."""
    return (base_seed * 1_000_003 + zlib.crc32(utt.encode("utf-8"))) % (2**31)


def input_digest(row: ManifestRow) -> str:
    """Identifies what a row asks for (text and reference), to notice edited manifests.

    The reference counts by its path relative to the manifest, so a data set
    moved together with its manifest is not redone.
    """
    ref = ""
    if row.prompt_wav is not None:
        ref = os.path.relpath(row.prompt_wav, row.source.parent) if row.source is not None else str(row.prompt_wav)
    key = "\x1f".join([row.text, row.prompt_text, ref])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def last_results(out_dir: Path) -> dict[str, dict]:
    """The latest results row of each utterance (later rows win)."""
    return {row["utt"]: row for row in read_jsonl(out_dir / RESULTS) if isinstance(row.get("utt"), str)}


def wav_matches(path: Path, audio_seconds: float | None) -> bool:
    """True when `path` is a readable wav of the recorded length (not damaged since)."""
    if not wav_data_complete(path):  # cut short: sf.info would report the shorter length
        return False
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        return False
    if audio_seconds is None:
        return True
    return abs(info.frames - round(float(audio_seconds) * info.samplerate)) <= 1


def plan_run(
    manifest: Manifest,
    out_dir: Path,
    *,
    limit: int | None = None,
    retry_failed: bool = False,
    profile_digest: str | None = None,
) -> SynthPlan:
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    previous = last_results(out_dir)
    plan = SynthPlan([], [], [])
    for row in rows:
        prev = previous.get(row.utt)
        if prev and prev.get("input_digest") not in (None, "", input_digest(row)):
            plan.changed.append(row.utt)
            plan.todo.append(row)
        elif prev and prev.get("status") == "ok" and wav_matches(out_dir / f"{row.utt}.wav", prev.get("audio_seconds")):
            plan.done.append(row.utt)
        elif prev and prev.get("status") == "failed" and not retry_failed:
            plan.failed_before.append(row.utt)
        else:
            plan.todo.append(row)
        if prev and profile_digest and prev.get("profile_digest") not in (None, "", profile_digest):
            plan.other_profiles.add(prev["profile_digest"])
    return plan


def tidy_out_dir(out_dir: Path) -> int:
    """Removes temp files left by a killed run and rewrites results.jsonl with one row per
    utterance (its latest). Call only while holding the OutputLock. Returns files removed."""
    removed = 0
    if not out_dir.is_dir():
        return 0
    for tmp in out_dir.glob(".*.tmp"):
        if _OUR_TEMP_FILE.match(tmp.name):
            tmp.unlink(missing_ok=True)
            removed += 1
    results = out_dir / RESULTS
    if results.exists():
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in last_results(out_dir).values())
        if results.read_bytes() != text.encode("utf-8"):  # duplicates, a torn tail or damaged lines
            write_text_atomic(results, text)
    return removed


class SynthRun:
    """Synthesizes planned rows with `concurrency` requests in flight.

    `stop` (an asyncio.Event; set it on the run's loop) stops admitting rows;
    requests in flight then get `grace_s` to finish before they are
    cancelled and left pending. When the engine fails as a whole, the run
    stops at once and `engine_error` says why.
    """

    def __init__(
        self,
        engine: Engine,
        out_dir: Path,
        *,
        concurrency: int = 8,
        max_new_tokens: int | None = None,
        retainer: Retainer | None = None,
        on_result: Callable[[UttResult], None] | None = None,
        grace_s: float = STOP_GRACE_S,
    ):
        self.engine = engine
        self.out_dir = out_dir
        self.concurrency = max(1, concurrency)
        self.max_new_tokens = max_new_tokens
        self.retainer = retainer
        self.on_result = on_result or (lambda r: None)
        self.grace_s = grace_s
        self.stop = asyncio.Event()  # Ctrl-C, SIGTERM: no new rows
        self.results: list[UttResult] = []
        self.engine_error: str | None = None
        self.left_pending: list[str] = []  # in flight when stopped, or taken down by an engine failure
        self.wall_seconds = 0.0
        self._engine_failed = asyncio.Event()

    async def run(self, rows: list[ManifestRow]) -> list[UttResult]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tidy_out_dir(self.out_dir)
        queue = deque(rows)
        in_flight: set[str] = set()
        t0 = time.perf_counter()
        with JsonlAppender(self.out_dir / RESULTS) as results:

            async def worker() -> None:
                while queue and not self.stop.is_set() and not self._engine_failed.is_set():
                    row = queue.popleft()
                    in_flight.add(row.utt)
                    result = await self._one(row)
                    in_flight.discard(row.utt)
                    if result is None:  # the engine failed under it: left pending
                        self.left_pending.append(row.utt)
                        continue
                    results.append(asdict(result))  # after the wav is in place
                    self.results.append(result)
                    self.on_result(result)

            workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(rows)) or 1)]
            all_done = asyncio.gather(*workers)
            stopped = asyncio.create_task(self.stop.wait())
            failed = asyncio.create_task(self._engine_failed.wait())
            try:
                await asyncio.wait([all_done, stopped, failed], return_when=asyncio.FIRST_COMPLETED)
                if not all_done.done() and not failed.done():
                    # Stopping: nothing new starts; what is in flight may finish for a while.
                    await asyncio.wait([all_done, failed], timeout=self.grace_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (stopped, failed, *workers):
                    task.cancel()
                outcomes = await asyncio.gather(*workers, return_exceptions=True)
                if all_done.done() and not all_done.cancelled():
                    all_done.exception()  # retrieved here; raised below
                self.left_pending.extend(sorted(in_flight))
                self.wall_seconds = time.perf_counter() - t0
        tidy_out_dir(self.out_dir)
        for outcome in outcomes:  # e.g. results.jsonl could not be written: nothing can be recorded
            if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                raise outcome
        return self.results

    async def _one(self, row: ManifestRow) -> UttResult | None:
        """Synthesizes one row; None when the engine failed as a whole (not this row's fault)."""
        result = UttResult(
            utt=row.utt,
            status="failed",
            line=row.line_no,
            input_digest=input_digest(row),
            profile_digest=self.engine.resolved.digest,
        )
        seed = utterance_seed(self.engine.profile.seed, row.utt)
        try:
            request = request_from_row(row, max_new_tokens=self.max_new_tokens, seed=seed)
        except InputError as exc:
            result.error = str(exc)
            result.finished_at = _now()
            return result
        pieces: list[np.ndarray] = []
        st = time.perf_counter()
        error: str | None = None
        info = None
        try:
            async for chunk in self.engine.generate(request):
                if chunk.num_samples and result.ttfp_s is None:
                    result.ttfp_s = chunk.t - st
                pieces.append(chunk.pcm)
                result.e2el_s = chunk.t - st
                info = chunk.info or info
        except RequestFailed as exc:
            error, info = exc.reason, exc.info
        except Exception as exc:  # noqa: BLE001 - any stage's fault ends this row, not the batch
            error = f"{type(exc).__name__}: {exc}"
        if error is not None and (fault := self.engine.fault()) is not None:
            self.engine_error = fault
            self._engine_failed.set()
            return None
        if error is not None and self.stop.is_set():
            return None  # failed while we shut down (a Ctrl-C also reaches vLLM's process): retry on resume
        pcm = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        sr = self.engine.sample_rate
        result.audio_seconds = len(pcm) / sr
        if info is not None:
            result.finish_reason, result.ref_cache = info.finish_reason, info.ref_cache
        if result.e2el_s and result.audio_seconds:
            result.rtf = result.e2el_s / result.audio_seconds
        result.flags = judge_audio(
            pcm, sr, text=row.text, finish_reason=None if error else result.finish_reason, error=error, thresholds=self.engine.profile.retention
        )
        if error is None and len(pcm) == 0:
            error = "the engine returned no audio"
        if error is None:
            try:
                write_wav_atomic(self.out_dir / f"{row.utt}.wav", pcm, sr)
                result.status, result.wav = "ok", f"{row.utt}.wav"
            except OSError as exc:
                error = f"could not write {self.out_dir / (row.utt + '.wav')}: {exc}"
        result.error = error
        if self.retainer is not None and result.flags:
            errors_before = self.retainer.errors
            kept = self.retainer.keep(pcm, sr, result.flags, self._retention_meta(row, result))
            result.retained = str(kept) if kept else None
            if self.retainer.errors > errors_before:
                result.retention_error = self.retainer.error_messages[-1]
        result.finished_at = _now()
        return result

    def _retention_meta(self, row: ManifestRow, result: UttResult) -> dict:
        return {
            "utt": row.utt,
            "source": row.where,
            "text": row.text,
            "expected_text": row.text,
            "transcript": None,  # synth has no ASR; eval-wer fills it
            "reference_wav": str(row.prompt_wav) if row.prompt_wav else None,
            "reference_text": row.prompt_text,
            "error": result.error,
            "status": result.status,
            "finish_reason": result.finish_reason,
            "timings": {"ttfp_s": result.ttfp_s, "e2el_s": result.e2el_s, "audio_seconds": result.audio_seconds, "rtf": result.rtf},
            "output_wav": str(self.out_dir / result.wav) if result.wav else None,
            "profile_digest": self.engine.resolved.digest,
            "command": "synth",
        }


def build_summary(
    manifest: Manifest,
    out_dir: Path,
    run: SynthRun | None,
    *,
    resolved,
    limit: int | None = None,
    interrupted: bool = False,
    engine_error: str | None = None,
    retainer: Retainer | None = None,
    started_at: str = "",
) -> dict:
    """Totals over every manifest row, from results.jsonl (this run and earlier ones)."""
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    latest = last_results(out_dir)
    ok = [latest[r.utt] for r in rows if latest.get(r.utt, {}).get("status") == "ok"]
    failed = [latest[r.utt] for r in rows if latest.get(r.utt, {}).get("status") == "failed"]
    this_run = list(run.results) if run else []
    run_audio = sum(r.audio_seconds for r in this_run)
    wall = run.wall_seconds if run else 0.0
    return {
        "manifest": str(manifest.path),
        "out_dir": str(out_dir),
        "num_rows": len(rows),
        "num_invalid_rows": len(manifest.errors),
        "num_ok": len(ok),
        "num_failed": len(failed),
        "num_pending": len(rows) - len(ok) - len(failed),
        "audio_seconds": round(sum(r.get("audio_seconds", 0.0) for r in ok), 3),
        "interrupted": interrupted,
        "engine_error": engine_error or (run.engine_error if run else None),
        "this_run": {
            "attempted": len(this_run),
            "ok": sum(r.status == "ok" for r in this_run),
            "failed": sum(r.status == "failed" for r in this_run),
            "left_pending": list(run.left_pending) if run else [],
            "wall_seconds": round(wall, 3),
            "audio_seconds": round(run_audio, 3),
            "audio_throughput": round(run_audio / wall, 4) if wall else 0.0,
        },
        "retention": None if retainer is None else {"dir": str(retainer.directory), "kept": retainer.kept, "errors": retainer.error_messages},
        "invalid_rows": [str(e) for e in manifest.errors],
        "failed": [{"utt": r["utt"], "line": r.get("line"), "error": r.get("error")} for r in failed],
        "model": run.engine.model_name if run else resolved.profile.model,
        "profile": resolved.to_dict(),
        "profile_name": resolved.name,
        "profile_digest": resolved.digest,
        "started_at": started_at,
        "finished_at": _now(),
        "omni_version": __version__,
    }


def write_summary(out_dir: Path, summary: dict) -> Path:
    return write_json_atomic(out_dir / SUMMARY, summary)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
