"""Reading the folders `omni report` is given into typed data; nothing is re-run.

A folder may hold (at any depth up to `MAX_DEPTH`): an `omni synth` output
(results.jsonl + summary.json), `omni eval` / `omni eval-wer` outputs
(eval_summary.json / wer_summary.json beside their results.jsonl), `omni bench`
result files (the summary `omni-bench-*.json`, vLLM-shaped per-pass files,
`--append-result` JSONL) and failed-audio retention sidecars
(failed_speech_*.json). Result files are read with the project's own models
where they are strict (synth rows and summaries, eval summaries); bench runs are
read tolerantly (keys present or not), since their keys grow (vLLM-named ones).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from omnicli.errors import UsageError
from omnicli.evaluation.summaries import EvalSummary
from omnicli.report.models import BenchRunView, EvalRow, SidecarMeta, drop_nonfinite, first_error
from omnicli.runtime.files import UserFileError, jsonl_lines, read_user_text
from omnicli.synth.results import SynthResult, SynthSummary

MAX_DEPTH = 4  # OUT/<pass>/eval/ is three levels below a bench --audio-out folder
SIDECAR_PREFIX = "failed_speech_"


class SourceError(UsageError):
    """A folder or file that cannot be read as anything `omni report` knows (a usage error)."""


@dataclass
class SynthFolder:
    dir: Path
    rows: list[SynthResult]
    summary: SynthSummary | None


@dataclass
class EvalFolder:
    dir: Path
    kind: str  # "eval" or "eval-wer"
    summary: EvalSummary
    rows: list[EvalRow]
    gen_dir: Path | None  # where the scored wavs are


@dataclass
class BenchSource:
    path: Path
    runs: list[dict[str, Any]]
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    engine_error: str | None = None
    document: bool = False  # a summary file (omni-bench-*.json), not a per-pass file


@dataclass
class Sidecar:
    path: Path
    meta: SidecarMeta


@dataclass
class Sources:
    synth: list[SynthFolder] = field(default_factory=list)
    evals: list[EvalFolder] = field(default_factory=list)
    bench: list[BenchSource] = field(default_factory=list)
    sidecars: list[Sidecar] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read, shown on the page

    def empty(self) -> bool:
        return not (self.synth or self.evals or self.bench or self.sidecars)


def read_sources(paths: list[Path]) -> Sources:
    """Reads every path (a folder, or a single bench result file). Unknown files are skipped; a file or row
    that cannot be read is a note (shown on the page under "Not read"), never the end of the report."""
    sources = Sources()
    seen: set[Path] = set()  # a folder inside another one given (eval's out inside its GEN_DIR) is read once
    for path in paths:
        if not path.exists():
            raise SourceError(f"{path}: no such file or folder")
        if not path.is_dir():
            if path.resolve() not in seen:
                seen.add(path.resolve())
                if not _guarded(path, sources, _read_bench_file, path, sources):
                    raise SourceError(f"{path}: not an omni bench result file"
                                      + (f" ({sources.notes[-1]})" if sources.notes else ""))
            continue
        for folder, files in _walk(path):
            if folder.resolve() not in seen:
                seen.add(folder.resolve())
                _read_folder(folder, files, sources)
    _drop_duplicate_runs(sources)
    return sources


def _guarded(path: Path, sources: Sources, read: Any, *args: Any) -> Any:
    """`read(*args)`, or, when something in the file is beyond what the readers expect, a note and None:
    one file never ends the report."""
    try:
        return read(*args)
    except RecursionError:
        sources.notes.append(f"{path}: nested too deeply to read; skipped")
    except Exception as exc:  # (a file anyone may have edited: whatever it holds, the rest is shown)
        sources.notes.append(f"{path}: not read ({type(exc).__name__}: {exc}); skipped")
    return None


def _walk(root: Path) -> Iterator[tuple[Path, set[str]]]:
    root_depth = len(root.parts)
    for here, dirs, files in os.walk(root):
        folder = Path(here)
        if len(folder.parts) - root_depth >= MAX_DEPTH:
            dirs[:] = []
        dirs.sort()
        yield folder, set(files)


def _read_folder(folder: Path, files: set[str], sources: Sources) -> None:
    if "results.jsonl" in files:
        _guarded(folder / "results.jsonl", sources, _read_synth, folder, "summary.json" in files, sources)
    for kind, summary_name, rows_name in (("eval", "eval_summary.json", "eval_results.jsonl"),
                                          ("eval-wer", "wer_summary.json", "wer_results.jsonl")):
        if summary_name in files:
            _guarded(folder / summary_name, sources, _read_eval, folder, kind, folder / summary_name,
                     folder / rows_name, sources)
    for name in sorted(files):
        path = folder / name
        if name.startswith(SIDECAR_PREFIX) and name.endswith(".json"):
            _guarded(path, sources, _read_sidecar, path, sources)
        elif name.endswith((".json", ".jsonl")) and name not in _KNOWN_NAMES:
            _guarded(path, sources, _read_bench_file, path, sources)


_KNOWN_NAMES = {"results.jsonl", "summary.json", "eval_summary.json", "eval_results.jsonl",
                "wer_summary.json", "wer_results.jsonl"}


def _read_text(path: Path, sources: Sources) -> str | None:
    """The file's text: only a regular file within the size bound (a FIFO or a link to /dev/zero is a note)."""
    try:
        return read_user_text(path)
    except UserFileError as exc:
        sources.notes.append(f"{path}: {exc.reason}")
        return None


def _load_json(path: Path, sources: Sources) -> Any:
    text = _read_text(path, sources)
    if text is None:
        return None
    try:
        return _finite(json.loads(text), text, str(path), sources)
    except json.JSONDecodeError as exc:
        sources.notes.append(f"{path}: not readable JSON ({exc})")
    except RecursionError:
        sources.notes.append(f"{path}: JSON nested too deeply to read")
    return None


def _finite(value: Any, text: str, where: str, sources: Sources) -> Any:
    """`value` with NaN / Infinity replaced by None, noted (the page's JSON.parse would refuse them). Only text
    holding the tokens is walked (Python's json writes non-finite numbers as NaN, Infinity, -Infinity)."""
    if "NaN" not in text and "Infinity" not in text:
        return value
    clean, count = drop_nonfinite(value, infinite_ok=("request_rate",))
    if count:
        sources.notes.append(f"{where}: {count} number(s) NaN or Infinity, shown empty")
    return clean


def _read_jsonl(path: Path, sources: Sources) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of each JSON object line; other lines are notes."""
    rows: list[tuple[int, dict[str, Any]]] = []
    text = _read_text(path, sources)
    if text is None:
        return rows
    for line_no, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = _finite(json.loads(line), line, f"{path}:{line_no}", sources)
        except json.JSONDecodeError as exc:
            sources.notes.append(f"{path}:{line_no}: not JSON ({exc.msg}); row skipped")
            continue
        except RecursionError:
            sources.notes.append(f"{path}:{line_no}: JSON nested too deeply to read; row skipped")
            continue
        if isinstance(row, dict):
            rows.append((line_no, row))
        else:
            sources.notes.append(f"{path}:{line_no}: not a JSON object; row skipped")
    return rows


def _read_synth(folder: Path, has_summary: bool, sources: Sources) -> None:
    latest: dict[str, SynthResult] = {}  # the latest row of an utt wins, as resume reads them
    path = folder / "results.jsonl"
    for line_no, raw in _read_jsonl(path, sources):
        try:
            row = SynthResult.model_validate(raw)
        except ValidationError as exc:
            sources.notes.append(f"{path}:{line_no}: not a synth row ({first_error(exc)}); skipped")
            continue
        latest.pop(row.utt, None)
        latest[row.utt] = row
    summary = None
    if has_summary:
        data = _load_json(folder / "summary.json", sources)
        try:
            summary = SynthSummary.model_validate(data)
        except ValidationError:
            sources.notes.append(f"{folder / 'summary.json'}: not an omni synth summary; its totals are not shown")
    sources.synth.append(SynthFolder(folder, list(latest.values()), summary))


def _read_eval(folder: Path, kind: str, summary_path: Path, rows_path: Path, sources: Sources) -> None:
    data = _load_json(summary_path, sources)
    try:
        summary = EvalSummary.model_validate(data)
    except ValidationError as exc:
        sources.notes.append(f"{summary_path}: not an omni {kind} summary ({first_error(exc)}); skipped")
        return
    rows: list[EvalRow] = []
    for line_no, raw in _read_jsonl(rows_path, sources) if rows_path.exists() else []:
        try:
            rows.append(EvalRow.model_validate(raw))
        except ValidationError as exc:
            sources.notes.append(f"{rows_path}:{line_no}: not an {kind} row ({first_error(exc)}); skipped")
    sources.evals.append(EvalFolder(folder, kind, summary, rows, _gen_dir(folder, summary.gen_dir)))


def _read_sidecar(path: Path, sources: Sources) -> None:
    raw = _load_json(path, sources)
    if not isinstance(raw, dict):
        if raw is not None:
            sources.notes.append(f"{path}: not a retention sidecar (not a JSON object); skipped")
        return
    try:
        meta = SidecarMeta.model_validate(raw)
    except ValidationError as exc:
        sources.notes.append(f"{path}: not a retention sidecar ({first_error(exc)}); skipped")
        return
    sources.sidecars.append(Sidecar(path, meta))


def _gen_dir(eval_dir: Path, recorded: str | None) -> Path | None:
    """The folder of the scored wavs: as recorded (absolute, or from here), else the eval folder's parent
    (eval's default --out is GEN_DIR/eval/)."""
    if recorded and "\0" not in recorded:
        candidate = Path(recorded)
        if candidate.is_dir():
            return candidate.resolve()
    parent = eval_dir.parent
    return parent.resolve() if parent.is_dir() else None


def _read_bench_file(path: Path, sources: Sources) -> bool:
    """Reads a bench summary file, a vLLM-shaped per-pass file or an --append-result JSONL; False if none."""
    if path.suffix == ".jsonl":
        objects = _read_jsonl(path, sources)
    else:
        data = _load_json(path, sources)
        objects = [(0, data)] if isinstance(data, dict) else []
    runs: list[dict[str, Any]] = []
    for line_no, obj in objects:
        where = f"{path}:{line_no}" if line_no else str(path)
        if isinstance(obj.get("runs"), list) and "comparisons" in obj:
            doc_runs = [run for i, r in enumerate(obj["runs"])
                        if (run := _bench_run(r, f"{where}: runs[{i}]", sources)) is not None]
            engine_error = obj.get("engine_error")
            sources.bench.append(
                BenchSource(
                    path,
                    doc_runs,
                    [c for c in obj.get("comparisons") or [] if isinstance(c, dict)],
                    obj.get("interrupted") is True,
                    engine_error if isinstance(engine_error, str) else None,
                    document=True,
                )
            )
            continue
        if _is_vllm_pass(obj) and (run := _bench_run(obj, where, sources)) is not None:
            runs.append(run)
    if runs:
        sources.bench.append(BenchSource(path, runs))
    return bool(runs) or any(b.path == path for b in sources.bench)


def _bench_run(raw: Any, where: str, sources: Sources) -> dict[str, Any] | None:
    """The run as read, when the keys the page uses have the types it expects; else a note and None."""
    if not isinstance(raw, dict):
        sources.notes.append(f"{where}: not a JSON object; run skipped")
        return None
    try:
        BenchRunView.model_validate(raw)
    except ValidationError as exc:
        sources.notes.append(f"{where}: not a bench run ({first_error(exc)}); skipped")
        return None
    return raw


def _is_vllm_pass(obj: dict[str, Any]) -> bool:
    return "completed" in obj and "duration" in obj and ("backend" in obj or "profile_label" in obj)


def bench_runs(sources: Sources) -> list[dict[str, Any]]:
    """Every run, each with `arm`: its profile label, or, when two bench invocations ran the same profile
    under the same load shape (an A/B of two result files), the label and the file, so the two stay apart."""
    homes: dict[tuple, set[Path]] = {}
    for source in sources.bench:
        for run in source.runs:
            homes.setdefault(
                (run.get("profile_label"), run.get("max_concurrency"), str(run.get("request_rate"))), set()
            ).add(source.path)
    clashing = {key[0] for key, paths in homes.items() if len(paths) > 1}
    out = []
    for source in sources.bench:
        for run in source.runs:
            label = str(run.get("profile_label") or run.get("label") or source.path.stem)
            out.append(
                {**run, "arm": f"{label} ({source.path.stem})" if run.get("profile_label") in clashing else label}
            )
    return out


def run_key(run: dict[str, Any]) -> tuple:
    """What makes two run records the same pass (a summary file and its per-pass files repeat them)."""
    return (run.get("started_at"), run.get("profile_label"), run.get("max_concurrency"), str(run.get("request_rate")))


def _drop_duplicate_runs(sources: Sources) -> None:
    """A pass in both the summary file and a --save-result file is kept once (from the summary)."""
    seen: set[tuple] = set()
    for source in sorted(sources.bench, key=lambda b: not b.document):
        kept = []
        for run in source.runs:
            key = run_key(run)
            if key in seen and key[0] is not None:
                continue
            seen.add(key)
            kept.append(run)
        source.runs = kept
    sources.bench = [b for b in sources.bench if b.runs]
