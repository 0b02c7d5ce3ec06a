"""Manifests: Seed-TTS `meta.lst` and JSONL, parsed into rows plus per-row errors.

A bad row never stops the batch: it becomes a `RowError` naming the file,
the line and the reason, and every other row is still returned.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from omnicli.errors import UsageError

SEED_TTS_FIELDS = "utt|prompt_text|prompt_wav|text[|gt_wav]"
MAX_UTT_BYTES = 200  # leaves room for ".wav" and temp-file affixes under NAME_MAX (255)
MAX_VOICE_CHARS = 100  # a voice is a name (Orpheus: tara, leah, ...), not a sentence
MAX_INSTRUCT_CHARS = 2000  # a voice described in words (Qwen3-TTS VoiceDesign)
AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".mp3", ".ogg", ".opus", ".aiff", ".aif", ".au", ".caf", ".w64", ".rf64"})


@dataclass(frozen=True)
class ManifestRow:
    utt: str
    text: str
    prompt_text: str = ""
    prompt_wav: Path | None = None
    gt_wav: Path | None = None
    voice: str = ""  # a named voice (JSONL `voice`); "" = the profile's
    instruct: str = ""  # a voice described in words (JSONL `instruct`); "" = the profile's
    line_no: int = 0
    source: Path | None = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line_no}"


@dataclass(frozen=True)
class RowError:
    source: Path
    line_no: int
    reason: str
    utt: str | None = None

    def __str__(self) -> str:
        return f"{self.source}:{self.line_no}: {self.reason}"


@dataclass
class Manifest:
    path: Path
    rows: list[ManifestRow] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def limited(self, limit: int | None) -> Manifest:
        """The first `limit` valid rows and only the errors met before the cut:
        a bad row after the last row taken is not part of the run."""
        if limit is None or limit > len(self.rows):
            return self
        cut = self.rows[limit - 1].line_no if limit > 0 else 0
        return Manifest(self.path, self.rows[:limit], [e for e in self.errors if e.line_no < cut])


class ManifestError(UsageError, ValueError):
    """The manifest as a whole cannot be read (missing file, directory, ...)."""


def check_utt_id(utt: str) -> str | None:
    """Returns why `utt` is not a safe file name, or None when it is."""
    if not utt:
        return "empty utterance id"
    if utt in (".", "..") or utt.startswith("."):
        return f"utterance id {utt!r} starts with '.' (hidden file or path traversal)"
    bad = sorted({c for c in utt if c in "/\\" or ord(c) < 32 or ord(c) == 127})
    if bad:
        return f"utterance id {utt!r} contains characters not allowed in a file name: {bad!r}"
    if len(utt.encode("utf-8")) > MAX_UTT_BYTES:
        return f"utterance id is {len(utt.encode('utf-8'))} bytes long (limit {MAX_UTT_BYTES})"
    return None


def check_voice(voice: str) -> str | None:
    """Returns why `voice` cannot name a voice, or None when it can."""
    if len(voice) > MAX_VOICE_CHARS:
        return f"voice is {len(voice)} characters long (limit {MAX_VOICE_CHARS})"
    bad = sorted({c for c in voice if ord(c) < 32 or ord(c) == 127})
    if bad:
        return f"voice {voice!r} contains control characters: {bad!r}"
    return None


def resolve_audio_path(
    value: str, base: Path, allow_outside: bool, must_exist: bool = True, *, what: str = "reference audio"
) -> tuple[Path | None, str | None]:
    """Resolves a manifest audio path relative to `base`; returns (path, error).

    Symbolic links are followed before the containment check, so a link that
    points outside the manifest folder counts as outside.
    """
    if not value:
        return None, None
    if "\x00" in value:
        return None, f"{what} path {value!r} contains a NUL byte"
    raw = Path(value)
    path = (raw if raw.is_absolute() else base / raw).resolve()
    if not allow_outside:
        if raw.is_absolute():
            return (
                None,
                f"absolute {what} path {value!r} is not allowed (use a path relative to the manifest, or "
                "--allow-outside-paths)",
            )
        if not path.is_relative_to(base.resolve()):
            return None, f"{what} path {value!r} escapes the manifest folder (use --allow-outside-paths to permit)"
    if must_exist and not path.is_file():
        return None, f"{what} is a directory: {path}" if path.is_dir() else f"{what} not found: {path}"
    return path, None


def _parse_seed_tts_short(parts: list[str]) -> dict[str, str]:
    """seed-tts-eval's shorter layouts (get_wav_res_ref_text.py): `utt|text`
    and `utt|text|prompt_wav` (where utt may carry a `.wav` suffix)."""
    utt, text = parts[0].strip(), parts[1].strip()
    prompt_wav = parts[2].strip() if len(parts) == 3 else ""
    if len(parts) == 3 and utt.endswith(".wav"):
        utt = utt[: -len(".wav")]
    return {
        "utt": utt,
        "prompt_text": "",
        "prompt_wav": prompt_wav,
        "text": text,
        "gt_wav": "",
        "voice": "",
        "instruct": "",
    }


def _parse_seed_tts(line: str, short_layouts: bool = False) -> tuple[dict[str, str] | None, str | None]:
    parts = line.split("|")
    if short_layouts and len(parts) in (2, 3):
        return _parse_seed_tts_short(parts), None
    if len(parts) < 4:
        return None, f"expected {SEED_TTS_FIELDS}, found {len(parts)} field(s)"
    if len(parts) > 5:
        return None, f"expected {SEED_TTS_FIELDS}, found {len(parts)} fields (is there a '|' inside the text?)"
    utt, prompt_text, prompt_wav, text = (p.strip() for p in parts[:4])
    gt_wav = parts[4].strip() if len(parts) == 5 else ""
    if gt_wav and Path(gt_wav).suffix.lower() not in AUDIO_SUFFIXES:
        # Otherwise "a|b|c.wav|hello|world" would silently lose "|world" from the text.
        return None, f"5th field {gt_wav!r} is not an audio file name (is there a '|' inside the text?)"
    return {
        "utt": utt,
        "prompt_text": prompt_text,
        "prompt_wav": prompt_wav,
        "text": text,
        "gt_wav": gt_wav,
        "voice": "",
        "instruct": "",
    }, None


def _parse_jsonl(line: str) -> tuple[dict[str, str] | None, str | None]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(obj, dict):
        return None, "expected a JSON object per line"
    for key in ("utt", "text"):
        if key not in obj:
            return None, f"missing required key {key!r}"
    fields = {
        "utt": obj.get("utt"),
        "text": obj.get("text"),
        "prompt_text": obj.get("ref_text", obj.get("prompt_text", "")) or "",
        "prompt_wav": obj.get("ref_audio", obj.get("prompt_wav", "")) or "",
        "gt_wav": obj.get("gt_wav", "") or "",
        "voice": obj.get("voice", "") or "",
        "instruct": obj.get("instruct", "") or "",
    }
    checked: dict[str, str] = {}
    for key, value in fields.items():
        if not isinstance(value, str):
            return None, f"key {key!r} must be a string, got {type(value).__name__}"
        checked[key] = value.strip()
    return checked, None


def _row_from_fields(
    fields: dict[str, str], path: Path, line_no: int, allow_outside_paths: bool, check_audio: bool
) -> tuple[ManifestRow | None, str | None]:
    """The row of checked fields once its audio paths resolve (relative to the manifest), or why not."""
    base = path.parent
    prompt_wav, error = resolve_audio_path(fields["prompt_wav"], base, allow_outside_paths, must_exist=check_audio)
    if error:
        return None, error
    # gt_wav is informational (used by evaluation): a missing file is not an error.
    gt_wav, error = resolve_audio_path(fields["gt_wav"], base, allow_outside_paths, must_exist=False, what="gt_wav")
    if error:
        return None, error
    row = ManifestRow(
        utt=fields["utt"], text=fields["text"], prompt_text=fields["prompt_text"], prompt_wav=prompt_wav,
        gt_wav=gt_wav, voice=fields["voice"], instruct=fields["instruct"], line_no=line_no, source=path,
    )
    return row, None


def read_manifest(
    path: str | os.PathLike, allow_outside_paths: bool = False, check_audio: bool = True, short_layouts: bool = False
) -> Manifest:
    """Parses a manifest; the format follows the suffix (`.jsonl`/`.json` or Seed-TTS).

    `check_audio=False` skips the reference-exists check (evaluation needs
    only the texts, not the prompt wavs). `short_layouts=True` also accepts
    seed-tts-eval's 2- and 3-field lines (`utt|text`, `utt|text|prompt_wav`),
    which carry what WER needs but no prompt transcript for synthesis.
    """
    path = Path(path)
    if not path.exists():
        raise ManifestError(f"{path}: manifest not found")
    if not path.is_file():
        raise ManifestError(f"{path}: not a file")
    if path.suffix.lower() in (".jsonl", ".json"):
        parse = _parse_jsonl
    else:
        def parse(line: str) -> tuple[dict[str, str] | None, str | None]:
            return _parse_seed_tts(line, short_layouts)
    manifest = Manifest(path=path)
    seen: dict[str, int] = {}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            def bad(reason: str, utt: str | None = None) -> None:
                manifest.errors.append(RowError(path, line_no, reason, utt))  # noqa: B023 (called within this iteration)

            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad(f"not valid UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})")
                continue
            line = line.rstrip("\r\n").lstrip("\ufeff")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields, error = parse(line)
            if fields is None:  # then `error` says why
                bad(error or "unreadable row")
                continue
            utt = fields["utt"]
            if (error := check_utt_id(utt)) is not None:
                bad(error)
                continue
            if not fields["text"]:
                bad("empty text", utt)
                continue
            if utt in seen:
                bad(f"duplicate utterance id {utt!r} (first on line {seen[utt]})", utt)
                continue
            seen[utt] = line_no  # even if this row turns out bad: a later row must not take its id
            if (error := check_voice(fields["voice"])) is not None:
                bad(error, utt)
                continue
            if len(fields["instruct"]) > MAX_INSTRUCT_CHARS:
                bad(f"instruct is {len(fields['instruct'])} characters long (limit {MAX_INSTRUCT_CHARS})", utt)
                continue
            row, error = _row_from_fields(fields, path, line_no, allow_outside_paths, check_audio)
            if row is None:
                bad(error or "unreadable row", utt)
                continue
            manifest.rows.append(row)
    return manifest
