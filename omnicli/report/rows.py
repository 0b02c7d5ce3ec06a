"""One utterance row per output: synth results, eval scores and retention sidecars joined by utt.

Rows are joined within one generation folder (the synth OUT, or the folder an
eval scored); texts and reference prompts come from the manifest the run
recorded. The word diff is the alignment the WER counted (diff.py).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnicli.manifest import ManifestError, ManifestRow, read_manifest
from omnicli.report.diff import word_diff
from omnicli.report.models import EvalRow
from omnicli.report.sources import Sources, SynthFolder

# The one-click groups of the table, and the reasons / statuses that put a row in each.
GROUPS: dict[str, str] = {
    "failed": "the request or its scoring failed",
    "empty": "no audio samples",
    "silent": "near-silent audio",
    "runaway": "hit the token cap, too long for its text, or over 30 s",
    "misrecognized": "ASR disagreed: WER above the threshold or an empty transcript",
}
_FAILED_STATUSES = {"failed", "empty_audio", "unreadable", "asr_error", "empty_reference", "scorer_error"}
_RUNAWAY_REASONS = {"hit_cap", "too_long"}
_MISRECOGNIZED_REASONS = {"asr_mismatch", "asr_empty"}


@dataclass
class UttRow:
    utt: str
    source: str  # the generation folder, as the user named it
    text: str | None = None
    status: str = "ok"
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    duration_s: float | None = None
    rtf: float | None = None
    ttfp_s: float | None = None
    finish_reason: str | None = None
    wer: float | None = None  # fraction, as the per-utterance results hold it
    hyp: str | None = None
    diff: list[list[str]] | None = None
    sim: float | None = None
    mos: float | None = None
    audio: Path | None = None  # the generated (or retained) wav
    ref_audio: Path | None = None  # the reference prompt
    retained: list[Path] = field(default_factory=list)  # retention copies (synth's, eval's)
    line: int | None = None

    @property
    def groups(self) -> list[str]:
        reasons = set(self.reasons)
        out = []
        if self.status in _FAILED_STATUSES or self.error or "error" in reasons:
            out.append("failed")
        if "empty" in reasons or self.status == "empty_audio":
            out.append("empty")
        if "near_silent" in reasons:
            out.append("silent")
        if reasons & _RUNAWAY_REASONS or self.finish_reason == "length" or "over_30s" in reasons:
            out.append("runaway")
        if reasons & _MISRECOGNIZED_REASONS or self.status == "asr_empty":
            out.append("misrecognized")
        return out


@dataclass
class Utterances:
    rows: list[UttRow]
    wer_threshold: float | None
    notes: list[str]
    manifest_dirs: list[Path] = field(default_factory=list)  # the folders of the manifests read (audio may be there)


def collect_rows(sources: Sources, *, manifest: Path | None = None, cwd: Path | None = None) -> Utterances:
    cwd = cwd or Path.cwd()
    notes: list[str] = []
    by_folder: dict[Path, dict[str, UttRow]] = {}
    labels: dict[Path, str] = {}
    manifests: dict[Path, dict[str, ManifestRow]] = {}
    read: set[Path] = set()
    manifest_dirs: list[Path] = []

    def folder_rows(folder: Path, recorded_manifest: str | None) -> dict[str, UttRow]:
        key = folder.resolve()
        if key not in by_folder:
            by_folder[key] = {}
            labels[key] = _label(folder, cwd)
        path = manifest or _find_manifest(recorded_manifest, folder, cwd)
        if path is not None and path.resolve() not in read:
            read.add(path.resolve())
            entries = _manifest_rows(path, notes)
            if entries:  # a manifest's prompts may live beside it: its folder is one the page may link into
                manifest_dirs.append(path.resolve().parent)
            for utt, entry in entries.items():  # synth's manifest, then each eval's
                manifests.setdefault(key, {}).setdefault(utt, entry)
        elif path is None and recorded_manifest:
            notes.append(
                f"{folder}: manifest {recorded_manifest} not found (texts and reference prompts missing; pass "
                "--manifest)"
            )
        return by_folder[key]

    for synth in sources.synth:
        rows = folder_rows(synth.dir, synth.summary.manifest if synth.summary else None)
        label = labels[synth.dir.resolve()]
        for result in synth.rows:
            rows[result.utt] = _from_synth(synth, result, label)
    threshold = None
    for ev in sorted(sources.evals, key=lambda e: e.kind == "eval"):  # eval after eval-wer: its figures win
        gen_dir = ev.gen_dir or ev.dir
        rows = folder_rows(gen_dir, ev.summary.manifest)
        label = labels[gen_dir.resolve()]
        threshold = ev.summary.wer_threshold if ev.summary.wer_threshold is not None else threshold
        for raw in ev.rows:
            utt = raw.utt
            row = rows.get(utt) or rows.setdefault(
                utt, UttRow(utt=utt, source=label, audio=_existing(gen_dir / f"{utt}.wav"))
            )
            _add_eval(row, raw)
    _add_sidecars(sources, by_folder, labels, cwd)

    out: list[UttRow] = []
    for key, rows in by_folder.items():
        texts = manifests.get(key, {})
        for row in rows.values():
            entry = texts.get(row.utt)
            if entry is not None:
                row.text = row.text or entry.text
                row.ref_audio = row.ref_audio or _existing(entry.prompt_wav)
                row.line = row.line or entry.line_no
            out.append(row)
    return Utterances(out, threshold, notes, manifest_dirs)


def _label(folder: Path, cwd: Path) -> str:
    try:
        return os.path.relpath(folder, cwd)
    except ValueError:  # another drive (Windows)
        return str(folder)


def _existing(path: str | os.PathLike | None) -> Path | None:
    if not path:
        return None
    return _existing_file(os.path.abspath(path))


@functools.lru_cache(maxsize=4096)  # reference prompts repeat across rows
def _existing_file(path: str) -> Path | None:
    return Path(path) if os.path.isfile(path) else None


def _find_manifest(recorded: str | None, folder: Path, cwd: Path) -> Path | None:
    """The manifest a run recorded: as written (absolute or from the current folder), else from the run's folder up."""
    if not recorded:
        return None
    path = Path(recorded)
    candidates = (
        [path]
        if path.is_absolute()
        else [cwd / path, *(parent / path for parent in [folder, *folder.resolve().parents])]
    )
    return next((c for c in candidates if c.is_file()), None)


def _manifest_rows(path: Path, notes: list[str]) -> dict[str, ManifestRow]:
    try:
        manifest = read_manifest(path, check_audio=False, short_layouts=True, allow_outside_paths=True)
    except ManifestError as exc:
        notes.append(str(exc))
        return {}
    return {row.utt: row for row in manifest.rows}


def _from_synth(synth: SynthFolder, result: Any, label: str) -> UttRow:
    retained = _existing(result.retained)
    audio = _existing(synth.dir / result.wav) if result.wav else None
    return UttRow(
        utt=result.utt,
        source=label,
        status=str(result.status),
        reasons=[str(r) for r in result.flags],
        error=result.error,
        duration_s=result.audio_seconds if audio or retained else None,
        rtf=result.rtf,
        ttfp_s=result.ttfp_s,
        finish_reason=result.finish_reason,
        audio=audio or retained,
        retained=[retained] if retained else [],
        line=result.line or None,
    )


def _add_eval(row: UttRow, raw: EvalRow) -> None:
    if raw.status and raw.status != "ok" and row.status == "ok":
        row.status = raw.status
    row.text = row.text or raw.ref
    row.error = row.error or raw.error
    for reason in raw.reasons:
        if reason not in row.reasons:
            row.reasons.append(reason)
    if raw.over_30s and "over_30s" not in row.reasons:
        row.reasons.append("over_30s")
    if row.duration_s is None and raw.audio_s is not None:
        row.duration_s = raw.audio_s
    if raw.has_wer:
        row.wer = raw.wer
        row.hyp = raw.hyp
        if raw.ref_norm is not None and raw.hyp_norm is not None:
            row.diff = word_diff(raw.ref_norm, raw.hyp_norm)
    if raw.has_sim:
        row.sim = raw.sim
    mos = raw.dnsmos_ovrl if raw.dnsmos_ovrl is not None else raw.utmos
    if mos is not None:
        row.mos = mos
    row.ref_audio = row.ref_audio or _existing(raw.reference)
    kept = _existing(raw.retained)
    if kept and kept not in row.retained:
        row.retained.append(kept)
    if row.audio is None and row.retained:
        row.audio = row.retained[0]


def _add_sidecars(
    sources: Sources, by_folder: dict[Path, dict[str, UttRow]], labels: dict[Path, str], cwd: Path
) -> None:
    """Retained outputs: their reasons join the row they came from; one whose run is not given becomes its own row."""
    rows_of = [row for rows in by_folder.values() for row in rows.values()]
    by_retained = {kept: row for row in rows_of for kept in row.retained}
    by_output = {row.audio: row for row in rows_of if row.audio}
    for sidecar in sources.sidecars:
        meta = sidecar.meta
        wav = _existing(sidecar.path.with_suffix(".wav"))
        row = by_retained.get(wav) if wav else None
        made_from = _existing(meta.output_wav or meta.gen_wav)
        if row is None and made_from is not None:  # kept by a run whose results do not name the copy: by its output
            row = by_output.get(made_from)
        if row is None:
            folder = sidecar.path.parent.resolve()
            rows = by_folder.setdefault(folder, {})
            labels.setdefault(folder, _label(folder, cwd))
            utt = meta.utt or sidecar.path.stem
            key = utt if utt not in rows else f"{utt} ({sidecar.path.stem})"
            timings = meta.timings
            row = rows[key] = UttRow(
                utt=key,
                source=labels[folder],
                text=meta.text or meta.expected_text,
                status=meta.status or "retained",
                error=meta.error,
                duration_s=meta.duration_s,
                rtf=timings.rtf if timings else None,
                ttfp_s=timings.ttfp_s if timings else None,
                finish_reason=meta.finish_reason,
                hyp=meta.transcript,
                wer=meta.wer,
                audio=wav,
                retained=[wav] if wav else [],
                ref_audio=_existing(meta.reference_wav or meta.reference),
            )
        for reason in meta.reasons:
            if reason not in row.reasons:
                row.reasons.append(reason)
        if row.diff is None and meta.ref_norm is not None and meta.hyp_norm is not None:
            row.diff = word_diff(meta.ref_norm, meta.hyp_norm)  # an eval-wer sidecar keeps both
