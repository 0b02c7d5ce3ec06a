"""One Qwen3-TTS generation through vLLM-Omni's pipeline (in-process, `omni`'s engine) against the
reference `qwen-tts` package, on the same random-weight checkpoint and greedy decoding.

    python scripts/compare_qwen3_tts_reference.py CKPT_DIR [--tokens 24] [--text "..."]

CKPT_DIR is a CustomVoice checkpoint (`omni models build-tiny qwen3-tts DIR` writes DIR/custom_voice).
Both sides decode greedily (talker and code predictor, repetition penalty 1.0, at most --tokens
talker tokens), so the same weights must give the same codes and so the same audio. Each side runs
in its own process: the reference needs stand-ins of its own (below) that must not meet vLLM-Omni's.

The reference (qwen-tts 0.1.1) pins transformers 4.57.3; beside transformers 5.19 it imports with
six stand-ins: `sox` and `torchaudio` (only its 25 Hz tokenizer imports them, off this path),
`check_model_inputs()` called as a decorator factory, the removed 'default' RoPE initializer, the
`pad_token_id` attribute configs no longer carry, and the mask builders' renamed `inputs_embeds` and
dropped `cache_position`. Install it with
`pip install --no-deps qwen-tts==0.1.1`.

Prints the audio length of each side, the frames, and the largest sample difference.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.machinery
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

SPEAKER, LANGUAGE = "vivian", "English"


def _reference_stand_ins() -> None:
    for name in ("sox", "torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi"):
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules.setdefault(name, module)
    import torch
    import transformers.utils.generic as generic
    from transformers import modeling_rope_utils

    real = generic.check_model_inputs

    def check_model_inputs(func=None, *_args, **_kwargs):
        return real(func) if func is not None else real

    generic.check_model_inputs = check_model_inputs

    def default_rope(config, device=None, seq_len=None, **_kwargs):
        del seq_len
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        theta = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
        return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim)), 1.0

    modeling_rope_utils.ROPE_INIT_FUNCTIONS.setdefault("default", default_rope)

    from transformers import masking_utils

    def renamed(fn):
        def call(*args, input_embeds=None, cache_position=None, **kwargs):  # 5.x derives positions itself
            del cache_position
            return fn(*args, inputs_embeds=input_embeds, **kwargs) if input_embeds is not None else fn(*args, **kwargs)
        return call

    for name in ("create_causal_mask", "create_sliding_window_causal_mask"):
        setattr(masking_utils, name, renamed(getattr(masking_utils, name)))


def run_reference(ckpt: Path, text: str, tokens: int) -> np.ndarray:
    _reference_stand_ins()
    import torch
    from qwen_tts import Qwen3TTSModel
    from qwen_tts.core.models import configuration_qwen3_tts as cfg

    for klass in (cfg.Qwen3TTSTalkerConfig, cfg.Qwen3TTSTalkerCodePredictorConfig):
        klass.pad_token_id = None
    torch.manual_seed(0)
    model = Qwen3TTSModel.from_pretrained(str(ckpt), dtype=torch.float32)
    wavs, sr = model.generate_custom_voice(
        text=text, speaker=SPEAKER, language=LANGUAGE, do_sample=False, subtalker_dosample=False,
        repetition_penalty=1.0, max_new_tokens=tokens)
    assert sr == 24000, sr
    return np.asarray(wavs[0], np.float32)


async def _pipeline(ckpt: Path, text: str, tokens: int, dtype: str) -> np.ndarray:
    from omnicli.engine.request import TTSRequest
    from omnicli.profile import load_profile
    from omnicli.vllm_omni.engine import OmniEngine

    resolved = load_profile("qwen3-tts", platform="cpu", overrides=[
        f"model_path={ckpt}", "talker.temperature=0", "talker.repetition_penalty=1.0", "talker.max_num_seqs=1",
        "codec.max_num_seqs=1", f"talker.dtype={dtype}",
        "vllm_omni.deploy_config={stages: [{stage_id: 0, subtalker_sampling_params: {do_sample: false}}]}"])
    engine = await OmniEngine.start(resolved)
    try:
        parts = []
        request = TTSRequest("ref-compare", text, max_new_tokens=tokens, seed=0, voice=SPEAKER, language=LANGUAGE)
        async for chunk in engine.generate(request):
            parts.append(np.asarray(chunk.pcm, np.float32).reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)
    finally:
        await engine.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt", type=Path)
    ap.add_argument("--tokens", type=int, default=24, help="talker token cap of the one generation")
    ap.add_argument("--text", default="Hello from the tiny random checkpoint.")
    ap.add_argument("--talker-dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the pipeline talker's dtype (the reference runs float32)")
    ap.add_argument("--phase", choices=("reference", "pipeline"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    ckpt = args.ckpt.resolve()
    if args.phase:
        audio = run_reference(ckpt, args.text, args.tokens) if args.phase == "reference" else asyncio.run(
            _pipeline(ckpt, args.text, args.tokens, args.talker_dtype))
        np.save(args.out, audio)
        return
    with tempfile.TemporaryDirectory() as tmp:
        audio = {}
        for phase in ("reference", "pipeline"):
            out = Path(tmp) / f"{phase}.npy"
            subprocess.run([sys.executable, __file__, str(ckpt), "--tokens", str(args.tokens), "--text", args.text,
                            "--talker-dtype", args.talker_dtype, "--phase", phase, "--out", str(out)], check=True)
            audio[phase] = np.load(out)
    ref, ours = audio["reference"], audio["pipeline"]
    n = min(ref.size, ours.size)
    diff = float(np.max(np.abs(ref[:n] - ours[:n]))) if n else float("nan")
    peak = float(np.max(np.abs(ref))) if ref.size else 0.0
    frames = [float(np.corrcoef(ref[i:i + 1920], ours[i:i + 1920])[0, 1]) for i in range(0, n - 1919, 1920)]
    print(json.dumps({"talker_dtype": args.talker_dtype, "per_frame_correlation": [round(c, 3) for c in frames],
                      "reference_samples": int(ref.size), "pipeline_samples": int(ours.size),
                      "reference_frames": ref.size / 1920, "pipeline_frames": ours.size / 1920,
                      "max_abs_diff": diff, "reference_peak": peak,
                      "max_abs_diff_share_of_peak": diff / peak if peak else None}, indent=2))


if __name__ == "__main__":
    main()
