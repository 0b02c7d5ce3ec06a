"""vLLM-Omni's `SEED_TTS_*` environment variables (its Seed-TTS WER/SIM/UTMOS evaluation,
vllm_omni/benchmarks/data_modules/seed_tts_eval.py): none changes what `omni bench` does, so each one set
is named once with omni's own way to the same end, instead of being silently ignored."""

from __future__ import annotations

import os
from collections.abc import Mapping

# name -> what omni bench does instead
SEED_TTS_VARS = {
    "SEED_TTS_WER_EVAL": "use --eval wer or --seed-tts-wer-eval",
    "SEED_TTS_SIM_EVAL": "use --eval sim",
    "SEED_TTS_UTMOS_EVAL": "use --eval mos (its MOS backend is omni eval's)",
    "SEED_TTS_HF_WHISPER_MODEL": "use --eval-asr",
    "SEED_TTS_EVAL_DEVICE": "the scorers run on the profile's device",
    "SEED_TTS_SIM_DEVICE": "the scorers run on the profile's device",
    "SEED_TTS_UTMOS_DEVICE": "the scorers run on the profile's device",
    "SEED_TTS_WER_SAVE_AUDIO_DIR": "use --audio-out DIR",
    "SEED_TTS_WER_SAVE_ITEMS": "the per-utterance rows are omni eval's results.jsonl beside the kept audio",
    "SEED_TTS_WAVLM_MODEL": "omni eval's sim backend is its own (docs/eval.md)",
    "SEED_TTS_WAVLM_MAX_SECONDS": "omni eval's sim backend is its own (docs/eval.md)",
    "SEED_TTS_WAVLM_MIN_SAMPLES": "omni eval's sim backend is its own (docs/eval.md)",
    "SEED_TTS_UTMOS_HF_REPO": "omni eval's MOS models are local files (docs/eval.md)",
    "SEED_TTS_UTMOS_JIT_FILE": "omni eval's MOS models are local files (docs/eval.md)",
}


def seed_tts_env_notes(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per vLLM-Omni variable that is set (non-empty), saying it is ignored and what to do."""
    env = os.environ if environ is None else environ
    return [f"${name} is vLLM-Omni's and ignored here: {instead}"
            for name, instead in SEED_TTS_VARS.items() if env.get(name)]
