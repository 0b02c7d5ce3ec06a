"""One Qwen3-TTS generation through vLLM-Omni's pipeline (in-process, `omni`'s engine) against the
reference `qwen-tts` package, on the same random-weight checkpoint and greedy decoding.

    python scripts/compare_qwen3_tts_reference.py CKPT_DIR [--tokens 24] [--text "..."] [--talker-dtype float32]

CKPT_DIR is a CustomVoice checkpoint (`omni models build-tiny qwen3-tts DIR` writes DIR/custom_voice).
Both sides decode greedily (talker and code predictor, repetition penalty 1.0, at most --tokens
talker tokens), so the same weights must give the same codes and so the same audio. Both run in
float32 by default (the reference always does; `--talker-dtype bfloat16` runs the pipeline's talker
as the CPU preset does). Each side runs in its own process: the reference needs stand-ins of its
own (below) that must not meet vLLM-Omni's.

What is compared:
- the codes: the pipeline's are the `codec_frames` vLLM-Omni's Code2Wav returns beside the audio
  it decoded from them, the reference's are what `generate_custom_voice` hands its speech
  tokenizer; per frame, equal or not, and the first differing (frame, codebook);
- at that first difference, the reference's own logits there (recorded by hooks on the talker's
  codec head and the code predictor's heads during its generation, with both sides' inputs still
  equal up to that point): the two candidates' logits and the gap between them, which tells a
  near-tie (float rounding) from a real disagreement;
- the audio: lengths, per-frame correlation, largest sample difference; and the pipeline's codes
  decoded by the reference's tokenizer (in one pass) against the pipeline's streamed audio, which
  separates the codec path (vLLM-Omni decodes in chunks with left context) from the codes.

The reference (qwen-tts 0.1.1) pins transformers 4.57.3; beside transformers 5.19 it imports with
six stand-ins: `sox` and `torchaudio` (only its 25 Hz tokenizer imports them, off this path),
`check_model_inputs()` called as a decorator factory, the removed 'default' RoPE initializer, the
`pad_token_id` attribute configs no longer carry, and the mask builders' renamed `inputs_embeds` and
dropped `cache_position`. It need not go into the project's venv:
`pip install --no-deps --target /tmp/qwen-tts qwen-tts==0.1.1`, then `--reference-path /tmp/qwen-tts`
(put first on the reference process's `sys.path`).

Prints one JSON object.
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
FRAME = 1920  # samples per 12.5 Hz frame at 24 kHz


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


def _recompute_rope(*roots) -> list[str]:
    """Computes every rotary embedding's `inv_freq` again after loading, and returns their names.

    transformers 5 builds the model on the meta device and materializes non-persistent buffers
    empty; it re-initializes those of its own classes (Mimi's), not qwen-tts's: the talker's, the
    code predictor's and the codec decoder's `inv_freq` came out as uninitialized memory (zeros,
    or values like -2e15), i.e. a wrong RoPE on every position past 0."""
    fixed = []
    for root in roots:
        for name, module in root.named_modules():
            init = getattr(module, "rope_init_fn", None)
            if init is None or not hasattr(module, "inv_freq"):
                continue
            inv_freq, scaling = init(module.config, module.inv_freq.device)
            module.register_buffer("inv_freq", inv_freq, persistent=False)
            module.original_inv_freq = inv_freq
            module.attention_scaling = scaling
            fixed.append(name)
    return fixed


def _record_logits(model) -> dict[int, list]:
    """Hooks that keep the last position's logits of every call: group 0 from the talker's codec head
    (call f is frame f), group g from the code predictor's head g-1 (call f is frame f)."""
    talker = model.model.talker
    logits: dict[int, list] = {g: [] for g in range(talker.config.num_code_groups)}

    def keep(group):
        def hook(_module, _inputs, output):
            logits[group].append(output[0, -1].detach().float().clone())
        return hook

    talker.codec_head.register_forward_hook(keep(0))
    for i, head in enumerate(talker.code_predictor.lm_head):
        head.register_forward_hook(keep(i + 1))
    return logits


def run_reference(ckpt: Path, text: str, tokens: int, pipeline_codes: Path | None,
                  raw_rope: bool = False) -> dict[str, np.ndarray]:
    _reference_stand_ins()
    import torch
    from qwen_tts import Qwen3TTSModel
    from qwen_tts.core.models import configuration_qwen3_tts as cfg

    for klass in (cfg.Qwen3TTSTalkerConfig, cfg.Qwen3TTSTalkerCodePredictorConfig):
        klass.pad_token_id = None
    torch.manual_seed(0)
    model = Qwen3TTSModel.from_pretrained(str(ckpt), dtype=torch.float32)
    tokenizer = model.model.speech_tokenizer
    if not raw_rope:
        fixed = _recompute_rope(model.model, tokenizer.model)
        print("reference: RoPE recomputed in", ", ".join(fixed), file=sys.stderr)
    logits = _record_logits(model)
    decoded: list = []
    real_decode = tokenizer.decode

    def decode(items, *args, **kwargs):  # the codes generate_custom_voice hands its tokenizer
        decoded.extend(np.asarray(item["audio_codes"].cpu()) for item in items)
        return real_decode(items, *args, **kwargs)

    tokenizer.decode = decode
    wavs, sr = model.generate_custom_voice(
        text=text, speaker=SPEAKER, language=LANGUAGE, do_sample=False, subtalker_dosample=False,
        repetition_penalty=1.0, max_new_tokens=tokens)
    assert sr == 24000, sr
    out = {"audio": np.asarray(wavs[0], np.float32), "codes": decoded[0].astype(np.int64)}
    for g, rows in logits.items():
        out[f"logits_{g}"] = torch.stack(rows).numpy() if rows else np.zeros((0, 0), np.float32)
    if pipeline_codes is not None and pipeline_codes.exists():  # the pipeline's codes, one full decode
        codes = torch.from_numpy(np.load(pipeline_codes))
        if codes.numel():
            (wav,), _ = real_decode([{"audio_codes": codes}])
            out["pipeline_codes_decoded"] = np.asarray(wav, np.float32)
    return out


async def _pipeline(ckpt: Path, text: str, tokens: int, dtype: str) -> dict[str, np.ndarray]:
    from omnicli.engine.request import TTSRequest
    from omnicli.profile import load_profile
    from omnicli.vllm_omni.engine import OmniEngine

    resolved = load_profile("qwen3-tts", platform="cpu", overrides=[
        f"model_path={ckpt}", "talker.temperature=0", "talker.repetition_penalty=1.0", "talker.max_num_seqs=1",
        "codec.max_num_seqs=1", f"talker.dtype={dtype}",
        "vllm_omni.deploy_config={stages: [{stage_id: 0, subtalker_sampling_params: {do_sample: false}}]}"])
    engine = await OmniEngine.start(resolved)
    frames: list[np.ndarray] = []
    real_outputs = engine._outputs

    async def outputs(request_id, stream, info):  # the codec_frames Code2Wav returns beside its audio
        async for out in real_outputs(request_id, stream, info):
            got = (out.multimodal_output or {}).get("codec_frames")
            for part in got if isinstance(got, list) else [got]:
                if part is not None and getattr(part, "numel", lambda: 0)():
                    frames.append(np.asarray(part.cpu(), np.int64).reshape(-1, 16))
            yield out

    engine._outputs = outputs
    try:
        parts = []
        request = TTSRequest("ref-compare", text, max_new_tokens=tokens, seed=0, voice=SPEAKER, language=LANGUAGE)
        async for chunk in engine.generate(request):
            parts.append(np.asarray(chunk.pcm, np.float32).reshape(-1))
        audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        codes = np.concatenate(frames) if frames else np.zeros((0, 16), np.int64)
        return {"audio": audio, "codes": codes}
    finally:
        await engine.close()


def _dedupe_frames(codes: np.ndarray, audio_frames: int) -> tuple[np.ndarray, int]:
    """The pipeline's `codec_frames` hold one row more than the audio has frames: Code2Wav returns
    frame 0 with the early first-audio chunk and again with the next chunk. Drops rows equal to the
    row before them, as many as the excess (random codes never repeat a whole 16-code row by chance)."""
    excess = len(codes) - audio_frames
    keep = [0]
    for i in range(1, len(codes)):
        if excess > 0 and np.array_equal(codes[i], codes[i - 1]):
            excess -= 1
            continue
        keep.append(i)
    return codes[keep], len(codes) - len(keep)


def _first_difference(ref: np.ndarray, ours: np.ndarray, ref_out: dict) -> dict | None:
    """The first (frame, codebook) where the codes differ, and the reference's logits there."""
    n = min(len(ref), len(ours))
    diff = np.argwhere(ref[:n] != ours[:n])
    if not diff.size:
        return None
    frame, group = (int(v) for v in diff[0])
    found: dict = {"frame": frame, "codebook": group, "reference_code": int(ref[frame, group]),
                   "pipeline_code": int(ours[frame, group])}
    rows = ref_out.get(f"logits_{group}")
    if rows is not None and len(rows) > frame:
        row = rows[frame]
        a, b = float(row[found["reference_code"]]), float(row[found["pipeline_code"]])
        top = np.sort(row)[::-1]
        found.update(reference_logit_of_reference_code=a, reference_logit_of_pipeline_code=b, gap=a - b,
                     logit_scale=float(np.std(row)), top2_gap=float(top[0] - top[1]))
    return found


def _audio_figures(ref: np.ndarray, ours: np.ndarray) -> dict:
    n = min(ref.size, ours.size)
    diff = float(np.max(np.abs(ref[:n] - ours[:n]))) if n else float("nan")
    peak = float(np.max(np.abs(ref))) if ref.size else 0.0
    corr = [float(np.corrcoef(ref[i:i + FRAME], ours[i:i + FRAME])[0, 1]) for i in range(0, n - FRAME + 1, FRAME)]
    return {"samples": [int(ref.size), int(ours.size)], "per_frame_correlation": [round(c, 4) for c in corr],
            "max_abs_diff": diff, "peak": peak, "max_abs_diff_share_of_peak": diff / peak if peak else None}


def _run_phase(args, phase: str, out: Path, pipeline_codes: Path | None = None) -> dict[str, np.ndarray]:
    cmd = [sys.executable, __file__, str(args.ckpt.resolve()), "--tokens", str(args.tokens), "--text", args.text,
           "--talker-dtype", args.talker_dtype, "--phase", phase, "--out", str(out)]
    if args.reference_path:
        cmd += ["--reference-path", str(args.reference_path)]
    if pipeline_codes is not None:
        cmd += ["--pipeline-codes", str(pipeline_codes)]
    if args.reference_raw_rope:
        cmd += ["--reference-raw-rope"]
    subprocess.run(cmd, check=True, stdout=sys.stderr)  # stdout carries only the JSON
    with np.load(out) as data:
        return dict(data)


def compare(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.work and (work / "pipeline.npz").exists():  # a pipeline run kept from before: one engine start less
            print(f"reusing {work / 'pipeline.npz'}", file=sys.stderr)
            with np.load(work / "pipeline.npz") as data:
                ours = dict(data)
        else:  # first: the reference decodes the pipeline's codes too
            ours = _run_phase(args, "pipeline", work / "pipeline.npz")
        oc, dropped = _dedupe_frames(ours["codes"], ours["audio"].size // FRAME)
        np.save(work / "pipeline_codes.npy", oc)
        ref = _run_phase(args, "reference", work / "reference.npz", work / "pipeline_codes.npy")
    rc = ref["codes"]
    n = min(len(rc), len(oc))
    result = {
        "talker_dtype": {"pipeline": args.talker_dtype, "reference": "float32"},
        "reference_rope": "as loaded (uninitialized)" if args.reference_raw_rope else "recomputed",
        "frames": {"reference": int(len(rc)), "pipeline": int(len(oc)), "pipeline_repeated_rows_dropped": dropped,
                   "reference_audio": ref["audio"].size / FRAME, "pipeline_audio": ours["audio"].size / FRAME},
        "codes_equal_per_frame": [bool(np.array_equal(rc[i], oc[i])) for i in range(n)],
        "codebooks_equal_per_frame": [int((rc[i] == oc[i]).sum()) for i in range(n)],
        "first_difference": _first_difference(rc, oc, ref),
        "audio_reference_vs_pipeline": _audio_figures(ref["audio"], ours["audio"]),
    }
    if "pipeline_codes_decoded" in ref:  # same codes, two codec paths (full decode vs vLLM-Omni's chunks)
        result["audio_pipeline_codes_reference_decode_vs_pipeline"] = _audio_figures(
            ref["pipeline_codes_decoded"], ours["audio"])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt", type=Path)
    ap.add_argument("--tokens", type=int, default=24, help="talker token cap of the one generation")
    ap.add_argument("--text", default="Hello from the tiny random checkpoint.")
    ap.add_argument("--talker-dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the pipeline talker's dtype (the reference runs float32)")
    ap.add_argument("--reference-path", type=Path,
                    help="a folder holding qwen_tts (pip install --target), put first on the reference's sys.path")
    ap.add_argument("--reference-raw-rope", action="store_true",
                    help="keep the reference's RoPE buffers as transformers 5 loads them (uninitialized; the "
                    "comparison before this fix)")
    ap.add_argument("--work", type=Path,
                    help="keep both sides' arrays here (pipeline.npz, reference.npz); a pipeline.npz already "
                    "there is reused instead of starting the engine again (same checkpoint and settings only)")
    ap.add_argument("--phase", choices=("reference", "pipeline"), help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--pipeline-codes", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    ckpt = args.ckpt.resolve()
    if args.phase == "reference":
        if args.reference_path:
            sys.path.insert(0, str(args.reference_path))
        np.savez(args.out, **run_reference(ckpt, args.text, args.tokens, args.pipeline_codes,
                                           args.reference_raw_rope))
    elif args.phase == "pipeline":
        np.savez(args.out, **asyncio.run(_pipeline(ckpt, args.text, args.tokens, args.talker_dtype)))
    else:
        print(json.dumps(compare(args), indent=2))


if __name__ == "__main__":
    main()
