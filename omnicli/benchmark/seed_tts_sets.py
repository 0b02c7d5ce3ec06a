"""vLLM-Omni's Seed-TTS dataset variants, read as its loaders read them (vllm_omni/benchmarks/
data_modules/seed_tts_dataset.py), turned into manifest rows:

- `seed-tts` (voice clone): `utt|ref_text|prompt_wav|text` with the reference (omni's meta.lst reader);
- `seed-tts-text` (CustomVoice, a default voice): the same meta.lst, its reference fields not read (the
  named voice comes with `--extra-body '{"voice": ...}'`; vLLM-Omni sends no `language` for these);
- `seed-tts-design` (VoiceDesign): `utt|ref_text|wav_rel|text|voice_description`, no reference; the
  description is the request's `instruct` (vLLM-Omni's `instructions`), `language` English or Chinese by
  the locale. Fields after the fifth are ignored, as vLLM-Omni does. A row without a description, or
  without a text, is unusable: vLLM-Omni skips the first and sends the second (which its server refuses);
  omni names both, as every unusable row, and exits 2 before any engine starts.

Rows are shuffled with the seed as vLLM-Omni shuffles them (`random.Random(seed).shuffle`), so the same
seed gives the same order; past the last row omni cycles where vLLM-Omni draws extra rows at random.
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


# The fields each reader needs, as vLLM-Omni's loaders count them (any after these are ignored).
FIELDS = {"seed-tts-text": "utt|ref_text|wav|text", "seed-tts-design": "utt|ref_text|wav|text|voice_description"}


def read_seed_tts_set(path: Path, dataset: str, *, allow_outside_paths: bool = False) -> Manifest:
    """The rows of `path` as `dataset` reads them (ManifestError when the file cannot be read)."""
    if dataset in FIELDS and path.suffix != ".jsonl":
        return _read_meta(path, dataset)
    manifest = read_manifest(path, allow_outside_paths=allow_outside_paths, check_audio=dataset == "seed-tts")
    if dataset == "seed-tts-text":  # a JSONL manifest: its rows without their reference
        manifest.rows = [dataclasses.replace(row, prompt_wav=None, prompt_text="") for row in manifest.rows]
    return manifest


def _read_meta(path: Path, dataset: str) -> Manifest:
    """A meta.lst as vLLM-Omni's SeedTTSTextDataset / SeedTTSDesignDataset read it: the utt, the text (field 4)
    and, for design, the voice description (field 5); the reference fields are not read."""
    try:
        text = read_user_text(path, max_bytes=MAX_META_BYTES)
    except UserFileError as exc:
        raise ManifestError(str(exc)) from None
    needed = FIELDS[dataset].split("|")
    manifest = Manifest(path)
    seen: set[str] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < len(needed):
            manifest.errors.append(RowError(path, line_no, f"expected {FIELDS[dataset]} ({dataset}), found "
                                            f"{len(parts)} field(s)"))
            continue
        utt, target = parts[0], parts[3]
        description = parts[4] if dataset == "seed-tts-design" else None
        reason = ("empty utt" if not utt else "empty text" if not target else
                  "empty voice_description" if description == "" else
                  f"duplicate utt {utt!r}" if utt in seen else None)
        if reason is not None:
            manifest.errors.append(RowError(path, line_no, reason, utt or None))
            continue
        seen.add(utt)
        manifest.rows.append(ManifestRow(utt=utt, text=target, instruct=description or "", line_no=line_no,
                                         source=path))
    return manifest
