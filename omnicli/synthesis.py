"""Batch synthesis: manifest rows -> engine -> OUT/<utt>.wav + results.jsonl + summary.json.

Resumable: `results.jsonl` holds one row per finished utterance, appended as
each finishes; a re-run skips utterances whose last row is `ok` and whose wav
is intact (and, unless asked to retry, those that failed). Every file is
written atomically, so an interrupted run never leaves a torn wav or line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from omnicli import __version__
from omnicli.atomic import JsonlAppender, read_jsonl, write_json_atomic
from omnicli.audio import wav_is_intact, write_wav_atomic
from omnicli.engine import Engine, RequestFailed
from omnicli.manifest import Manifest, ManifestRow
from omnicli.requests import InputError, request_from_row
from omnicli.retention import Retainer, judge_audio

RESULTS = "results.jsonl"
SUMMARY = "summary.json"


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
    finished_at: str = ""


@dataclass
class SynthPlan:
    todo: list[ManifestRow]
    done: list[str]  # utts already finished in OUT
    failed_before: list[str]  # utts that failed earlier and are not retried


def utterance_seed(base_seed: int, utt: str) -> int:
    """A per-utterance seed that does not depend on order, so resumed runs match."""
    return (base_seed * 1_000_003 + zlib.crc32(utt.encode("utf-8"))) % (2**31)


def last_results(out_dir: Path) -> dict[str, dict]:
    """The latest results row of each utterance (later rows win)."""
    return {row["utt"]: row for row in read_jsonl(out_dir / RESULTS) if "utt" in row}


def plan_run(manifest: Manifest, out_dir: Path, *, limit: int | None = None, retry_failed: bool = False) -> SynthPlan:
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    previous = last_results(out_dir)
    plan = SynthPlan([], [], [])
    for row in rows:
        prev = previous.get(row.utt)
        if prev and prev.get("status") == "ok" and wav_is_intact(out_dir / f"{row.utt}.wav"):
            plan.done.append(row.utt)
        elif prev and prev.get("status") == "failed" and not retry_failed:
            plan.failed_before.append(row.utt)
        else:
            plan.todo.append(row)
    return plan


class SynthRun:
    """Synthesizes planned rows with `concurrency` requests in flight."""

    def __init__(
        self,
        engine: Engine,
        out_dir: Path,
        *,
        concurrency: int = 8,
        max_new_tokens: int | None = None,
        retainer: Retainer | None = None,
        on_result: Callable[[UttResult], None] | None = None,
    ):
        self.engine = engine
        self.out_dir = out_dir
        self.concurrency = max(1, concurrency)
        self.max_new_tokens = max_new_tokens
        self.retainer = retainer
        self.on_result = on_result or (lambda r: None)
        self.stop = asyncio.Event()  # set to stop admitting work (Ctrl-C, SIGTERM)
        self.results: list[UttResult] = []
        self.wall_seconds = 0.0

    async def run(self, rows: list[ManifestRow]) -> list[UttResult]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        queue: asyncio.Queue[ManifestRow] = asyncio.Queue()
        for row in rows:
            queue.put_nowait(row)
        t0 = time.perf_counter()
        with JsonlAppender(self.out_dir / RESULTS) as results:

            async def worker() -> None:
                while not self.stop.is_set():
                    try:
                        row = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    result = await self._one(row)
                    results.append(asdict(result))  # after the wav is in place
                    self.results.append(result)
                    self.on_result(result)

            workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(rows)) or 1)]
            stopper = asyncio.create_task(self.stop.wait())
            try:
                # Finish normally, or on stop cancel whatever is still in flight.
                await asyncio.wait([stopper, asyncio.gather(*workers)], return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopper.cancel()
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
        self.wall_seconds = time.perf_counter() - t0
        return self.results

    async def _one(self, row: ManifestRow) -> UttResult:
        result = UttResult(utt=row.utt, status="failed", line=row.line_no)
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
        pcm = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        sr = self.engine.sample_rate
        result.audio_seconds = len(pcm) / sr
        if info is not None:
            result.finish_reason, result.ref_cache = info.finish_reason, info.ref_cache
        if result.e2el_s and result.audio_seconds:
            result.rtf = result.e2el_s / result.audio_seconds
        result.flags = judge_audio(pcm, sr, text=row.text, finish_reason=None if error else result.finish_reason, error=error, thresholds=self.engine.profile.retention)
        if error is None and len(pcm) == 0:
            error = "the engine returned no audio"
        if error is None:
            write_wav_atomic(self.out_dir / f"{row.utt}.wav", pcm, sr)
            result.status, result.wav = "ok", f"{row.utt}.wav"
        result.error = error
        if self.retainer is not None and result.flags:
            kept = self.retainer.keep(pcm, sr, result.flags, self._retention_meta(row, result))
            result.retained = str(kept) if kept else None
        result.finished_at = _now()
        return result

    def _retention_meta(self, row: ManifestRow, result: UttResult) -> dict:
        return {
            "utt": row.utt,
            "source": row.where,
            "text": row.text,
            "reference_wav": str(row.prompt_wav) if row.prompt_wav else None,
            "reference_text": row.prompt_text,
            "error": result.error,
            "finish_reason": result.finish_reason,
            "timings": {"ttfp_s": result.ttfp_s, "e2el_s": result.e2el_s, "audio_seconds": result.audio_seconds},
            "profile_digest": self.engine.resolved.digest,
            "command": "synth",
        }


def build_summary(manifest: Manifest, out_dir: Path, run: SynthRun | None, *, resolved, limit: int | None = None, interrupted: bool = False, started_at: str = "") -> dict:
    """Totals over every manifest row, from results.jsonl (this run and earlier ones)."""
    rows = manifest.rows[:limit] if limit is not None else manifest.rows
    latest = last_results(out_dir)
    ok = [latest[r.utt] for r in rows if latest.get(r.utt, {}).get("status") == "ok"]
    failed = [latest[r.utt] for r in rows if latest.get(r.utt, {}).get("status") == "failed"]
    this_run = run.results if run else []
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
        "this_run": {
            "attempted": len(this_run),
            "ok": sum(r.status == "ok" for r in this_run),
            "failed": sum(r.status == "failed" for r in this_run),
            "wall_seconds": round(wall, 3),
            "audio_seconds": round(run_audio, 3),
            "audio_throughput": round(run_audio / wall, 4) if wall else 0.0,
        },
        "invalid_rows": [str(e) for e in manifest.errors],
        "failed": [{"utt": r["utt"], "line": r.get("line"), "error": r.get("error")} for r in failed],
        "model": run.engine.model_name if run else resolved.profile.model,
        "profile": resolved.to_dict(),
        "profile_name": resolved.name,
        "profile_digest": resolved.digest,
        "started_at": started_at,
        "omni_version": __version__,
    }


def write_summary(out_dir: Path, summary: dict) -> Path:
    return write_json_atomic(out_dir / SUMMARY, summary)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
