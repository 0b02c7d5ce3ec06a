"""Cached transcripts for `--transcripts FILE`: re-scoring without running ASR.

Accepted, one utterance per line:
- JSONL: `{"utt": ..., "hyp": ...}`; extra keys are ignored, so eval-wer's
  own `wer_results.jsonl` can be fed back (rows whose hyp is null had no
  transcript and are skipped).
- TSV: `utt<TAB>hyp`, the hypothesis being everything after the first tab
  (a tab inside it counts as a space between words); a header line whose
  columns include `utt` and `hyp` selects those columns (so `wer_results.tsv` works too; with a `status`
  column, rows that never got a transcript are skipped). With a header, a
  row with more fields than the header is an error unless `hyp` is the last
  column, which then takes the rest of the line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from omnicli.errors import UsageError
from omnicli.evaluation.results import NO_TRANSCRIPT_STATUSES
from omnicli.runtime.files import UserFileError, jsonl_lines, read_user_text


class TranscriptsError(UsageError, ValueError):
    """The transcripts file cannot be used; the message names file and line."""


def _is_jsonl(path: Path, first_line: str | None) -> bool:
    if path.suffix.lower() in (".jsonl", ".json"):
        return True
    return first_line is not None and first_line.lstrip().startswith("{")


def read_transcripts(path: str | os.PathLike) -> dict[str, str]:
    """Returns {utt: hypothesis}. Raises TranscriptsError on a bad file or line."""
    path = Path(path)
    if not path.exists():
        raise TranscriptsError(f"{path}: transcripts file not found")
    try:  # a regular file within the size bound (a FIFO would block, /dev/zero never end)
        text = read_user_text(path, encoding="utf-8-sig")
    except UserFileError as exc:
        raise TranscriptsError(f"{path}: cannot read transcripts ({exc.reason})") from None
    # "\n" only: a hypothesis may hold U+2028 or U+0085, which str.splitlines would cut the row at
    lines = jsonl_lines(text)
    if lines and lines[-1] == "":
        lines.pop()
    first = next((line for line in lines if line.strip()), None)
    parse = _parse_jsonl if _is_jsonl(path, first) else _parse_tsv
    return parse(path, lines)


def _add(out: dict[str, str], path: Path, line_no: int, utt: str, hyp: str, first_seen: dict[str, int]) -> None:
    if not utt:
        raise TranscriptsError(f"{path}:{line_no}: empty utterance id")
    if utt in out:
        raise TranscriptsError(f"{path}:{line_no}: duplicate utterance id {utt!r} (first on line {first_seen[utt]})")
    out[utt] = hyp
    first_seen[utt] = line_no


def _parse_jsonl(path: Path, lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptsError(f"{path}:{line_no}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise TranscriptsError(f"{path}:{line_no}: JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise TranscriptsError(f"{path}:{line_no}: expected a JSON object with keys utt and hyp")
        utt, hyp = obj.get("utt"), obj.get("hyp")
        if not isinstance(utt, str):
            raise TranscriptsError(f"{path}:{line_no}: key 'utt' must be a string")
        if hyp is None:
            continue  # no transcript for this utterance (missing or failed before ASR)
        if not isinstance(hyp, str):
            raise TranscriptsError(f"{path}:{line_no}: key 'hyp' must be a string or null")
        _add(out, path, line_no, utt.strip(), hyp, seen)
    return out


def _parse_tsv(path: Path, lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    header = lines[0].split("\t") if lines else []
    if "utt" in header and "hyp" in header:
        return _parse_tsv_with_header(path, lines, header)
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        utt, tab, hyp = line.partition("\t")  # the hypothesis is everything after the first tab
        if not tab:
            raise TranscriptsError(f"{path}:{line_no}: expected utt<TAB>hyp, found 1 field(s)")
        _add(out, path, line_no, utt.strip(), _tabs_to_spaces(hyp), seen)
    return out


def _parse_tsv_with_header(path: Path, lines: list[str], header: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    utt_col, hyp_col = header.index("utt"), header.index("hyp")
    status_col = header.index("status") if "status" in header else None
    hyp_is_last = hyp_col == len(header) - 1
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) <= max(utt_col, hyp_col):
            raise TranscriptsError(
                f"{path}:{line_no}: expected {len(header)} tab-separated fields as in the header, found {len(fields)}")
        if len(fields) > len(header):
            if not hyp_is_last:  # a tab inside a cell: which one cannot be told, so never guess
                raise TranscriptsError(
                    f"{path}:{line_no}: found {len(fields)} tab-separated fields, the header has {len(header)} "
                    "(is there a tab inside the hypothesis?)"
                )
            fields = fields[:hyp_col] + [" ".join(fields[hyp_col:])]
        if status_col is not None and status_col < len(fields) and fields[status_col] in NO_TRANSCRIPT_STATUSES:
            continue
        _add(out, path, line_no, fields[utt_col].strip(), fields[hyp_col], seen)
    return out


def _tabs_to_spaces(hyp: str) -> str:
    # A tab inside a hypothesis separates words; the scorer (like seed-tts-eval) splits on spaces only.
    return hyp.replace("\t", " ")
