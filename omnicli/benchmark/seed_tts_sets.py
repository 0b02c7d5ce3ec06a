"""vLLM-Omni's Seed-TTS dataset variants, read as its loaders read them (vllm_omni/benchmarks/
data_modules/seed_tts_dataset.py), turned into manifest rows:

- `seed-tts` (voice clone): `utt|ref_text|prompt_wav|text` with the reference (omni's meta.lst reader);
- `seed-tts-text` (CustomVoice, a default voice): the same meta.lst, the reference left out (the named
  voice comes with `--extra-body '{"voice": ...}'`);
- `seed-tts-design` (VoiceDesign): `utt|ref_text|wav_rel|text|voice_description`, no reference; the
  description is the request's `instruct`. A row without a description is unusable (vLLM-Omni skips it;
  omni names it, as every unusable row).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from omnicli.manifest import Manifest, ManifestError, ManifestRow, RowError, read_manifest
from omnicli.runtime.files import UserFileError, read_user_text

DATASETS = ("seed-tts", "seed-tts-text", "seed-tts-design")
MAX_META_BYTES = 256 * 1024 * 1024
# The language vLLM-Omni's design requests name, by the locale folder the meta.lst lies in.
DESIGN_LANGUAGE = {"en": "English", "zh": "Chinese"}


def read_seed_tts_set(path: Path, dataset: str, *, allow_outside_paths: bool = False) -> Manifest:
    """The rows of `path` as `dataset` reads them (ManifestError when the file cannot be read)."""
    if dataset == "seed-tts-design":
        return _read_design(path)
    manifest = read_manifest(path, allow_outside_paths=allow_outside_paths, check_audio=dataset == "seed-tts")
    if dataset == "seed-tts-text":
        manifest.rows = [dataclasses.replace(row, prompt_wav=None, prompt_text="") for row in manifest.rows]
    return manifest


def _read_design(path: Path) -> Manifest:
    try:
        text = read_user_text(path, max_bytes=MAX_META_BYTES)
    except UserFileError as exc:
        raise ManifestError(str(exc)) from None
    manifest = Manifest(path)
    seen: set[str] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 5:
            manifest.errors.append(RowError(path, line_no, "expected utt|ref_text|wav|text|voice_description "
                                            f"(seed-tts-design), found {len(parts)} field(s)"))
            continue
        utt, _, _, target, description = parts
        reason = ("empty utt" if not utt else "empty text" if not target else
                  "empty voice_description" if not description else f"duplicate utt {utt!r}" if utt in seen else None)
        if reason is not None:
            manifest.errors.append(RowError(path, line_no, reason, utt or None))
            continue
        seen.add(utt)
        manifest.rows.append(ManifestRow(utt=utt, text=target, instruct=description, line_no=line_no, source=path))
    return manifest
