#!/usr/bin/env bash
# Regenerates the reference prompts of omnicli/data/demo/ (also reachable as datasets/demo/): four Harvard
# sentences spoken by hibari-tts's bundled voice "heart" (the reference voice: pip install
# 'omnicli[reference-voice]', pinned hibari-tts==0.2.1), 24 kHz mono 16-bit as Seed-TTS prompts, each with a
# fixed seed so the files come out the same every time. Only the bundled voice: hibari's others are downloads.
# meta.lst is written by hand (its texts are these sentences' transcripts and Harvard target sentences).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
out=$repo/omnicli/data/demo/prompts
mkdir -p "$out"
"$python" - "$out" <<'PY'
import sys
from pathlib import Path

import numpy as np
import soundfile as sf
from hibari import SAMPLE_RATE, Hibari
from hibari.voices import voice_path

PROMPTS = {  # file stem: transcript
    "heart_juice": "The juice of lemons makes fine punch.",
    "heart_glue": "Glue the sheet to the dark blue background.",
    "heart_well": "It is easy to tell the depth of a well.",
    "heart_chicken": "These days a chicken leg is a rare dish.",
}
out = Path(sys.argv[1])
tts = Hibari(voice="heart", model=voice_path("heart", download_missing=False))
for seed, (stem, text) in enumerate(PROMPTS.items()):
    audio = tts(text, seed=seed)
    voiced = np.flatnonzero(np.abs(audio) > 0.01)  # trim the silence around the sentence, keep 50 ms each side
    pad = SAMPLE_RATE // 20
    audio = audio[max(0, voiced[0] - pad): voiced[-1] + pad]
    sf.write(out / f"{stem}.wav", audio, SAMPLE_RATE, subtype="PCM_16")
    print(f"{stem}.wav: {len(audio) / SAMPLE_RATE:.2f} s  {text}")
PY
