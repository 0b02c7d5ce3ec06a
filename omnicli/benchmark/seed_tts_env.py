"""vLLM-Omni's `SEED_TTS_*` environment variables (its Seed-TTS WER/SIM/UTMOS evaluation,
vllm_omni/benchmarks/data_modules/seed_tts_eval.py and benchmarks/patch/patch.py).

Those with a meaning for `omni bench --eval` are honoured, read as vLLM-Omni reads them (`seed_tts_eval`):
the WER pass on or off, SIM beside it, the Whisper model, the scoring device, the folder the scored audio
is kept in. The rest are named once, with omni's own way to the same end, instead of being silently
ignored (`seed_tts_env_notes`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# name -> why it is not honoured and what omni bench does instead
IGNORED = {
    "SEED_TTS_UTMOS_EVAL": "omni bench cannot load UTMOS (a TorchScript program, loaded only with omni eval "
                           "--trust-torchscript): score the kept audio with omni eval --metrics mos --mos utmos "
                           "--trust-torchscript; --eval mos gives DNSMOS under seed_tts_dnsmos_*",
    "SEED_TTS_SIM_DEVICE": "the scorers share one device ($SEED_TTS_EVAL_DEVICE, else the profile's)",
    "SEED_TTS_UTMOS_DEVICE": "the scorers share one device ($SEED_TTS_EVAL_DEVICE, else the profile's)",
    "SEED_TTS_WER_SAVE_ITEMS": "the per-utterance rows are omni eval's eval/eval_results.jsonl beside the kept audio",
    "SEED_TTS_WAVLM_MODEL": "omni eval's SIM model is its own, local (docs/eval.md)",
    "SEED_TTS_WAVLM_MAX_SECONDS": "omni eval's SIM model is its own, local (docs/eval.md)",
    "SEED_TTS_WAVLM_MIN_SAMPLES": "omni eval's SIM model is its own, local (docs/eval.md)",
    "SEED_TTS_UTMOS_HF_REPO": "omni eval's MOS models are local files; nothing is downloaded (docs/eval.md)",
    "SEED_TTS_UTMOS_JIT_FILE": "omni eval's MOS models are local files; nothing is downloaded (docs/eval.md)",
}
# name -> what it sets (seed_tts_eval)
HONOURED = {
    "SEED_TTS_WER_EVAL": "the WER pass, as --seed-tts-wer-eval (1, true, yes)",
    "SEED_TTS_SIM_EVAL": "with the WER pass: SIM beside it, as --eval wer,sim (1, true, yes, on)",
    "SEED_TTS_HF_WHISPER_MODEL": "with the WER pass in English: its ASR, transformers:MODEL (as --eval-asr)",
    "SEED_TTS_EVAL_DEVICE": "with --eval: the device the scorers run on (default: the profile's)",
    "SEED_TTS_WER_SAVE_AUDIO_DIR": "with the WER pass and no --audio-out: the folder the scored audio is kept in",
}
SEED_TTS_VARS = {**HONOURED, **IGNORED}
_TRUE = ("1", "true", "yes")  # vLLM-Omni's SEED_TTS_WER_EVAL test (patch.py)
_SUBMETRIC = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def seed_tts_env_notes(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per vLLM-Omni variable set (non-empty) that omni bench does not honour, with what to do."""
    env = os.environ if environ is None else environ
    return [f"${name} is vLLM-Omni's and ignored here: {instead}" for name, instead in IGNORED.items()
            if env.get(name, "").strip()]


@dataclass(frozen=True)
class SeedTtsEval:
    """`--eval`, `--eval-asr`, `--audio-out` and the scoring device once the variables are applied."""

    metrics: str | None
    audio_out: Path | None
    asr: str | None
    device: str | None  # None: the profile's
    notes: tuple[str, ...] = ()


def seed_tts_eval(metrics: str | None, audio_out: Path | None, asr: str | None, *, wer_flag: bool,
                  result_dir: Path | None, locale: str = "en",
                  environ: Mapping[str, str] | None = None) -> SeedTtsEval:
    """vLLM-Omni's WER pass (`--seed-tts-wer-eval` or `$SEED_TTS_WER_EVAL`) as omni eval's `wer` on the kept
    audio, and the variables that configure it (they apply to `--eval wer` too). An option given on the
    command line wins over a variable; a variable set that has nothing to configure is said so."""
    env = os.environ if environ is None else environ

    def value(name: str) -> str:
        return env.get(name, "").strip()

    notes: list[str] = []
    unused: list[str] = []
    if value("SEED_TTS_WER_EVAL").lower() in _TRUE and not wer_flag:
        notes.append("$SEED_TTS_WER_EVAL: the WER pass is on, as --seed-tts-wer-eval")
        wer_flag = True
    wanted = ["wer"] if wer_flag else []
    wer_pass = wer_flag or "wer" in (metrics or "").split(",")
    if _SUBMETRIC.get(value("SEED_TTS_SIM_EVAL").lower()):
        if wer_pass:
            wanted.append("sim")
            notes.append("$SEED_TTS_SIM_EVAL: SIM beside the WER pass (omni eval's SIM model: eval.sim_backend)")
        else:
            unused.append("SEED_TTS_SIM_EVAL")
    if wanted:
        metrics = ",".join(dict.fromkeys([*(metrics.split(",") if metrics else []), *wanted]))
    saved = value("SEED_TTS_WER_SAVE_AUDIO_DIR")
    if audio_out is None and wer_pass:
        if saved:
            notes.append(f"$SEED_TTS_WER_SAVE_AUDIO_DIR: the scored audio is kept in {saved} (as <utt>.wav)")
        if saved or wer_flag:
            audio_out = Path(saved).expanduser() if saved else (result_dir or Path(".")) / "seed_tts_audio"
    elif saved and wer_pass:
        notes.append("$SEED_TTS_WER_SAVE_AUDIO_DIR: --audio-out given, which wins")
    elif saved:
        unused.append("SEED_TTS_WER_SAVE_AUDIO_DIR")
    whisper = value("SEED_TTS_HF_WHISPER_MODEL")
    if whisper and not wer_pass:
        unused.append("SEED_TTS_HF_WHISPER_MODEL")
    elif whisper and asr is None and locale == "en":
        asr = f"transformers:{whisper}"
        notes.append(f"$SEED_TTS_HF_WHISPER_MODEL: the WER pass's ASR is {asr}")
    elif whisper:
        notes.append("$SEED_TTS_HF_WHISPER_MODEL: not used (" + ("--eval-asr given, which wins" if asr else
                     "vLLM-Omni scores Chinese with Paraformer, and so does omni eval") + ")")
    device = value("SEED_TTS_EVAL_DEVICE") or None
    if device is not None and metrics is not None:
        notes.append(f"$SEED_TTS_EVAL_DEVICE: the scorers run on {device}")
    elif device is not None:
        unused.append("SEED_TTS_EVAL_DEVICE")
    if unused:
        notes.append(f"{', '.join('$' + n for n in unused)}: not used, nothing is scored (--eval wer, "
                     "--seed-tts-wer-eval or $SEED_TTS_WER_EVAL=1 score the kept audio)")
    return SeedTtsEval(metrics, audio_out, asr, device, tuple(notes))
