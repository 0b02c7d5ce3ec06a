"""`omni synth-merge`: shard folders of `omni synth --shard I/N` -> one normal synth folder.

The merged folder is what one `omni synth MANIFEST --out OUT` would have
left: `<utt>.wav` (hard links to the shards' files when they share a file
system, atomic copies otherwise), one results.jsonl row per utterance and a
summary.json over the whole manifest (after the shards' --limit). So
`omni synth MANIFEST --out OUT` afterwards resumes it like any folder (with
every shard merged and done: nothing to do), and `omni eval-wer OUT` scores it.

Only rows a shard owns are taken from its folder (a row of another shard is
never counted), an `ok` row only with its wav intact, and only when the
manifest row is still the one it was made from; anything else stays pending
in OUT, where a plain resume finishes it. Merging again into the same OUT
(say once a missing shard has finished) updates it: rows already in OUT
stay unless a shard brings a newer one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from omnicli.atomic import link_or_copy_atomic, write_bytes_atomic
from omnicli.errors import EXIT_OK, EXIT_SOME_FAILED, UsageError
from omnicli.manifest import Manifest, ManifestError, ManifestRow, read_manifest
from omnicli.synth.plan import (
    RESULTS,
    SUMMARY,
    OutputBusy,
    OutputLock,
    input_digest,
    latest_result_lines,
    tidy_out_dir,
    wav_matches,
)
from omnicli.synth.results import RetentionTotals, Status, SynthResult, SynthSummary, ThisRun
from omnicli.synth.shard import ShardSpec, ShardSpecError, recorded_shard, split_manifest
from omnicli.synth.summary import build_synth_summary, write_summary


class MergeError(UsageError, ValueError):
    """The folders cannot be merged as asked (bad input): nothing was written."""


@dataclass
class ShardFolder:
    path: Path
    summary: SynthSummary
    spec: ShardSpec


@dataclass
class MergeReport:
    out: Path
    count: int  # N
    shards: list[ShardFolder]
    summary: SynthSummary | None = None
    missing: list[int] = field(default_factory=list)  # shard indices no folder was given for
    rows_taken: int = 0
    linked: int = 0  # wavs hard-linked into OUT
    copied: int = 0  # wavs copied (another file system)
    not_taken: list[str] = field(default_factory=list)  # "where: why" of shard rows left pending
    foreign: int = 0  # rows in shard folders that belong to no shard given: ignored
    profile_digests: list[str] = field(default_factory=list)  # distinct digests, first shard's first
    skipped_out: bool = False  # OUT itself was among the folders given (a glob): left out

    @property
    def complete(self) -> bool:
        """Every shard present and every manifest row ok."""
        s = self.summary
        return s is not None and not self.missing and s.num_failed == s.num_pending == s.num_invalid_rows == 0

    @property
    def exit_code(self) -> int:
        """0 when the merged folder is complete, else 1: rows failed, pending or from missing shards."""
        return EXIT_OK if self.complete else EXIT_SOME_FAILED


def read_shard_folder(path: Path) -> ShardFolder:
    """The summary of one `omni synth --shard` folder, or MergeError saying what is wrong with it."""
    summary_path = path / SUMMARY
    if not path.is_dir():
        raise MergeError(f"{path}: not a folder")
    try:
        summary = SynthSummary.model_validate_json(summary_path.read_bytes())
    except FileNotFoundError:
        raise MergeError(
            f"{path}: no {SUMMARY} (its `omni synth --shard` run was killed before the end, or it is not a synth "
            "folder): run the same command again to finish it"
        ) from None
    except OSError as exc:
        raise MergeError(f"{summary_path}: cannot read: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise MergeError(
            f"{summary_path}: not an omni synth summary ({'.'.join(map(str, first['loc'])) or 'file'}: {first['msg']})"
        ) from None
    if summary.shard is None:
        raise MergeError(f"{path}: not a shard folder (its {SUMMARY} records no --shard I/N)")
    try:
        spec = ShardSpec.parse(summary.shard)
    except ShardSpecError as exc:
        raise MergeError(f"{summary_path}: shard {exc}") from None
    return ShardFolder(path, summary, spec)


def check_shards(shards: list[ShardFolder], *, manifest_given: bool) -> None:
    """Refuses folders that are not shards of one split of one manifest."""
    counts = {s.spec.count for s in shards}
    if len(counts) > 1:
        listing = ", ".join(f"{s.path} ({s.spec})" for s in shards)
        raise MergeError(
            f"the folders are shards of different splits (N = {', '.join(map(str, sorted(counts)))}): {listing}"
        )
    seen: dict[int, Path] = {}
    for s in shards:
        if s.spec.index in seen:
            raise MergeError(f"shard {s.spec} is given twice: {seen[s.spec.index]} and {s.path}")
        seen[s.spec.index] = s.path
    limits = {s.summary.limit for s in shards}
    if len(limits) > 1:
        raise MergeError(
            "the shards ran with different --limit values: "
            + ", ".join(f"{s.path} ({s.summary.limit})" for s in shards)
        )
    if not manifest_given:
        first = shards[0]
        for s in shards[1:]:
            if not _same_file(s.summary.manifest, first.summary.manifest):
                raise MergeError(
                    f"the shards ran different manifests: {first.path} ran {first.summary.manifest}, "
                    f"{s.path} ran {s.summary.manifest} (if that is one file seen from two machines, give it "
                    "with --manifest)"
                )


def _same_file(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_rows_match(shards: list[ShardFolder], manifest: Manifest) -> dict[int, Manifest]:
    """Each shard's share of the manifest, after checking it is the share that shard ran."""
    split = split_manifest(manifest, shards[0].spec.count)  # check_shards made sure there is one N
    shares = {}
    for s in shards:
        share = split[s.spec.index]
        if (len(share.rows), len(share.errors)) != (s.summary.num_rows, s.summary.num_invalid_rows):
            raise MergeError(
                f"{s.path}: shard {s.spec} ran {s.summary.num_rows} row(s) and {s.summary.num_invalid_rows} "
                f"invalid row(s), but {manifest.path} gives it {len(share.rows)} and {len(share.errors)}: was it run "
                "on another version of the manifest, or with other options (--limit, --allow-outside-paths)?"
            )
        shares[s.spec.index] = share
    return shares


def check_out(out: Path, manifest_path: Path) -> None:
    """OUT may be new, empty, or an earlier merge (or whole run) of the same manifest."""
    known, shard = recorded_shard(out)
    if not known:
        return
    if shard is not None:
        raise MergeError(f"--out {out} holds shard {shard} of a run: merge into a new folder")
    try:
        earlier = SynthSummary.model_validate_json((out / SUMMARY).read_bytes())
    except (OSError, ValidationError):
        return  # damaged: rewritten by the merge
    if not _same_file(earlier.manifest, str(manifest_path)):
        raise MergeError(f"--out {out} holds results of another manifest ({earlier.manifest}): merge into a new folder")


def merge_shards(
    dirs: Iterable[Path],
    out: Path,
    *,
    manifest: Path | None = None,
    allow_outside_paths: bool = False,
) -> MergeReport:
    """Merges shard folders into OUT (see the module's docstring). MergeError: nothing written;
    OSError: OUT could not be written (what was merged so far is consistent; merge again)."""
    dirs = list(dict.fromkeys(Path(d) for d in dirs))  # a folder named twice (overlapping globs) counts once
    # `omni synth-merge out/* --out out/all`, run again: the glob names OUT itself
    skipped_out = [d for d in dirs if d.resolve() == out.resolve()]
    dirs = [d for d in dirs if d not in skipped_out]
    if not dirs:
        raise MergeError("no shard folders given" + (f" (besides --out {out} itself)" if skipped_out else ""))
    shards = sorted((read_shard_folder(d) for d in dirs), key=lambda s: s.spec.index)
    check_shards(shards, manifest_given=manifest is not None)
    manifest_path = manifest if manifest is not None else Path(shards[0].summary.manifest)
    try:
        parsed = read_manifest(manifest_path, allow_outside_paths=allow_outside_paths)
    except ManifestError as exc:
        hint = "" if manifest is not None else " (give the manifest with --manifest)"
        raise MergeError(f"{exc}{hint}") from None
    limit = shards[0].summary.limit
    parsed = parsed.limited(limit)
    shares = check_rows_match(shards, parsed)
    check_out(out, manifest_path)
    count = shards[0].spec.count
    report = MergeReport(out=out, count=count, shards=shards, skipped_out=bool(skipped_out))
    report.missing = sorted(set(range(count)) - {s.spec.index for s in shards})
    report.profile_digests = list(dict.fromkeys(s.summary.profile_digest for s in shards))
    try:
        lock = OutputLock(out)
    except OutputBusy as exc:
        raise MergeError(str(exc)) from None
    with lock:
        tidy_out_dir(out)  # temp files of a killed merge, and one row per utt
        taken = [result for s in shards for result in _take_rows(s, shares[s.spec.index].rows, out, report)]
        write_results(out, taken)  # after the wavs the rows vouch for are in place
        report.summary = merged_summary(parsed, out, shards, limit=limit)
        write_summary(out, report.summary)
    return report


def write_results(out: Path, taken: list[SynthResult]) -> None:
    """OUT's results.jsonl: its own rows, each replaced by a shard's row for the same utt
    when there is one; written once, atomically (not a line and an fsync per row)."""
    rows = latest_result_lines(out)
    rows.update((result.utt, (result.to_line() + "\n").encode("utf-8")) for result in taken)
    write_bytes_atomic(out / RESULTS, b"".join(rows.values()))


def _take_rows(shard: ShardFolder, rows: list[ManifestRow], out: Path, report: MergeReport) -> list[SynthResult]:
    """Links the wavs of the shard's rows that can be taken into OUT; returns those rows."""
    taken = []
    latest = latest_result_lines(shard.path)
    owned = {row.utt for row in rows}
    report.foreign += sum(1 for utt in latest if utt not in owned)
    for row in rows:
        line = latest.pop(row.utt, None)
        if line is None:
            continue  # pending in the shard: pending in OUT
        result = SynthResult.model_validate_json(line)
        if result.input_digest != input_digest(row):
            why = "made from an earlier version of" if result.input_digest else "no input digest to check it against"
            report.not_taken.append(f"{shard.path}: {row.utt}: {why} {row.where}")
            continue
        if result.status == Status.OK:
            wav, refused = shard_wav(shard.path, row.utt)
            if refused:
                report.not_taken.append(f"{shard.path / (row.utt + '.wav')}: {refused}")
                continue
            if not wav_matches(wav, result.audio_seconds):
                report.not_taken.append(f"{wav}: missing or damaged")
                continue
            if link_or_copy_atomic(wav, out / f"{row.utt}.wav"):  # the wav first, then the row that vouches for it
                report.linked += 1
            else:
                report.copied += 1
        taken.append(result)
    report.rows_taken += len(taken)
    return taken


def shard_wav(folder: Path, utt: str) -> tuple[Path, str | None]:
    """The regular file `folder/<utt>.wav` stands for: itself, or where its symlinks lead
    when that is inside `folder`; else (path, why it is refused)."""
    wav = folder / f"{utt}.wav"
    if not wav.is_symlink():
        return wav, None
    try:
        target = wav.resolve(strict=True)
    except (OSError, RuntimeError):  # dangling, or a loop
        return wav, "a symlink that leads nowhere"
    if not target.is_relative_to(folder.resolve()):
        return wav, f"a symlink to {target}, outside the shard folder"
    if not target.is_file():
        return wav, f"a symlink to {target}, not a regular file"
    return target, None


@dataclass(frozen=True)
class _RecordedProfile:
    """The resolved profile as a shard's summary.json recorded it (what build_synth_summary reads)."""

    settings: dict[str, Any]
    name: str | None
    digest: str
    model: str

    def to_dict(self) -> dict[str, Any]:
        return self.settings

    @property
    def profile(self) -> _RecordedProfile:  # build_synth_summary reads resolved.profile.model
        return self


def merged_summary(manifest: Manifest, out: Path, shards: list[ShardFolder], *, limit: int | None) -> SynthSummary:
    """summary.json of OUT: totals over every manifest row from OUT's results, as a run
    would write them; `this_run` sums the shards' last runs (wall time: the longest, as
    they ran side by side). Profile and model are the first shard's."""
    first = shards[0].summary
    recorded = _RecordedProfile(first.profile, first.profile_name, first.profile_digest, first.model)
    summary = build_synth_summary(manifest, out, None, resolved=recorded, limit=limit,
                                  started_at=min((s.summary.started_at for s in shards), default=""))
    runs = [s.summary.this_run for s in shards]
    wall = max(r.wall_seconds for r in runs)
    audio = sum(r.audio_seconds for r in runs)
    this_run = ThisRun(
        attempted=sum(r.attempted for r in runs),
        ok=sum(r.ok for r in runs),
        failed=sum(r.failed for r in runs),
        left_pending=[utt for r in runs for utt in r.left_pending],
        wall_seconds=wall,
        audio_seconds=round(audio, 3),
        audio_throughput=round(audio / wall, 4) if wall else 0.0,
    )
    return summary.model_copy(update={
        "this_run": this_run,
        "interrupted": any(s.summary.interrupted for s in shards),
        "engine_error": _per_shard(shards, "engine_error"),
        "output_error": _per_shard(shards, "output_error"),
        "retention": _retention(shards),
    })


def _per_shard(shards: list[ShardFolder], key: str) -> str | None:
    messages = [f"shard {s.spec}: {getattr(s.summary, key)}" for s in shards if getattr(s.summary, key)]
    return "; ".join(messages) or None


def _retention(shards: list[ShardFolder]) -> RetentionTotals | None:
    """The shards' retention totals when they kept into one folder (rows name their own copies anyway)."""
    kept = [s.summary.retention for s in shards if s.summary.retention is not None]
    if not kept or len({r.dir for r in kept}) > 1:
        return None
    return RetentionTotals(dir=kept[0].dir, kept=sum(r.kept for r in kept), errors=[e for r in kept for e in r.errors])

