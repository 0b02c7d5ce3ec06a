"""summary.json: totals over every row of the run's manifest, from results.jsonl."""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from omnicli import __version__
from omnicli.atomic import write_json_atomic
from omnicli.engine.request import EngineError
from omnicli.manifest import Manifest
from omnicli.runtime.clock import utc_now
from omnicli.synth.plan import SUMMARY, latest_result_lines
from omnicli.synth.results import FailedRow, RetentionTotals, Status, SynthResult, SynthSummary, ThisRun

if TYPE_CHECKING:
    from omnicli.retention import Retainer
    from omnicli.synth.run import RowRun


class _NamesItsModel(Protocol):
    @property
    def model(self) -> str: ...


class ProfileFacts(Protocol):
    """What a summary records of the profile: a `ResolvedProfile`, or the one a shard's summary recorded."""

    @property
    def name(self) -> str | None: ...

    @property
    def digest(self) -> str: ...

    @property
    def profile(self) -> _NamesItsModel: ...

    def to_dict(self) -> dict[str, Any]: ...


def build_synth_summary(
    manifest: Manifest,
    out_dir: Path,
    run: RowRun | None,
    *,
    resolved: ProfileFacts,
    limit: int | None = None,
    interrupted: bool = False,
    engine_error: EngineError | None = None,
    output_error: str | None = None,
    retainer: Retainer | None = None,
    started_at: str = "",
    shard: str | None = None,
    redone: Collection[str] = (),
) -> SynthSummary:
    """Totals over every row of `manifest` (already cut by --limit and --shard; `limit` and
    `shard` are only recorded), from results.jsonl: this run and earlier ones.

    `redone`: utts the plan redid because their earlier row cannot be trusted (changed in the
    manifest, or no input digest): that row never counts; one this run did not finish again
    (the engine failed to start, a stop) is pending, and listed in `left_pending`."""
    latest = latest_result_lines(out_dir)
    this_run = list(run.results) if run else []
    finished_now = {r.utt for r in this_run}
    stale = [row.utt for row in manifest.rows if row.utt in redone and row.utt not in finished_now]
    for utt in stale:
        latest.pop(utt, None)
    num_ok, ok_audio, failed = 0, 0.0, []
    for row in manifest.rows:
        line = latest.get(row.utt)
        result = SynthResult.model_validate_json(line) if line is not None else None
        if result is not None and result.status == Status.OK:
            num_ok += 1
            ok_audio += result.audio_seconds
        elif result is not None:
            failed.append(result)
    del latest
    # A failed row's audio (cut at its token budget, say) is not throughput: counted apart.
    run_audio = sum(r.audio_seconds for r in this_run if r.status == Status.OK)
    failed_audio = sum(r.audio_seconds for r in this_run if r.status == Status.FAILED)
    wall = run.wall_seconds if run else 0.0
    num_rows = len(manifest.rows)
    return SynthSummary(
        manifest=str(manifest.path),
        out_dir=str(out_dir),
        num_rows=num_rows,
        num_invalid_rows=len(manifest.errors),
        num_ok=num_ok,
        num_failed=len(failed),
        num_pending=num_rows - num_ok - len(failed),
        audio_seconds=round(ok_audio, 3),
        interrupted=interrupted,
        # A stop the user asked for is not an engine error, though it may look like one
        # (vLLM aborts its requests on a terminal's Ctrl-C; a forced exit ends its start-up).
        engine_error=None if interrupted else _text(engine_error or (run.engine_error if run else None)),
        output_error=output_error,
        this_run=ThisRun(
            attempted=len(this_run),
            ok=sum(r.status == Status.OK for r in this_run),
            failed=sum(r.status == Status.FAILED for r in this_run),
            left_pending=list(dict.fromkeys([*(run.left_pending if run else []), *stale])),
            wall_seconds=round(wall, 3),
            audio_seconds=round(run_audio, 3),
            audio_throughput=round(run_audio / wall, 4) if wall else 0.0,
            failed_audio_seconds=round(failed_audio, 3),
        ),
        retention=None if retainer is None else RetentionTotals(
            dir=str(retainer.directory), kept=retainer.kept, errors=retainer.error_messages,
        ),
        invalid_rows=[str(e) for e in manifest.errors],
        limit=limit,
        shard=shard,
        failed=[FailedRow(utt=r.utt, line=r.line, error=r.error) for r in failed],
        model=run.model_name if run else resolved.profile.model,
        profile=resolved.to_dict(),
        profile_name=resolved.name,
        profile_digest=resolved.digest,
        started_at=started_at,
        finished_at=utc_now(),
        omni_version=__version__,
    )


def write_summary(out_dir: Path, summary: SynthSummary) -> Path:
    return write_json_atomic(out_dir / SUMMARY, summary.model_dump(mode="json"))


def write_summary_or_drop(out_dir: Path, summary: SynthSummary) -> str | None:
    """Writes summary.json; when that fails, removes an older one (it would contradict
    results.jsonl; a re-run rebuilds it) and returns why, as an output error."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_summary(out_dir, summary)
    except OSError as exc:
        with contextlib.suppress(OSError):
            (out_dir / SUMMARY).unlink(missing_ok=True)
        return f"cannot write to {out_dir}: {exc}"
    return None


def _text(error: EngineError | None) -> str | None:
    return None if error is None else str(error)
