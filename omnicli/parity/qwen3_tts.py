"""`omni models verify qwen3-tts`: our requests against vLLM-Omni's own serving adapter, on the same inputs.

vLLM-Omni's server turns an OpenAI speech request into an engine request in
its Qwen3-TTS adapter (`tts_adapters/qwen3_tts.py`: `build`,
`apply_sampling_overrides`, `validate_generation`). We run that adapter
in-process behind a minimal stand-in for the server object it reads (no HTTP,
no engine: the checkpoint's config and tokenizer are all it needs) and
compare, per task type the checkpoint serves, what it builds with what
`omnicli.vllm_omni.requests` builds: the placeholder prompt length, every
`additional_information` value, the reference samples, the stage-0 sampling
(budget, minimum, seed and the code predictor's seed) and the rule for a
talker that ends by length.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import io
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from omnicli.engine.request import TTSRequest
from omnicli.parity.checks import Check, verdict

TEXT = "Hello there, how are you today?"
REF_TEXT = "The birch canoe slid on the smooth planks."
# The packaged deploy/qwen3_tts.yaml's stage-0 defaults (what a server and our engine start from), plus a seed.
STAGE0_DEFAULTS: dict[str, Any] = {
    "temperature": 0.9, "top_k": 50, "max_tokens": 4096, "min_tokens": 2, "repetition_penalty": 1.05,
}


class _Server:
    """What the adapter reads from vLLM-Omni's speech server, for one checkpoint."""

    def __init__(self, engine_client, tokenizer, waveforms: dict[str, tuple[np.ndarray, int]]):
        self.engine_client = engine_client
        self.uploaded_speakers: dict = {}
        self._tts_tokenizer = None  # the adapter loads it, as the server does
        self._tts_executor = None
        self._tts_stage = None
        self._max_instructions_length = 4096
        self._tokenizer = tokenizer
        self.adapter: Any = None  # set once the adapter over this server exists
        self._waveforms = waveforms

    def _count_usage_text_tokens(self, text: str) -> int:
        tok = self._tts_tokenizer or self._tokenizer
        return len(tok(text, padding=False)["input_ids"]) if text else 0

    def _voice_created_at(self, _voice: str):
        return None

    def _validate_ref_audio_format(self, _ref_audio) -> str | None:
        return None

    def _get_available_speakers(self):
        return self.adapter.capabilities.supported_speakers

    async def _resolve_ref_audio_array(self, ref_audio: str):
        wav, sr = self._waveforms[ref_audio]
        return wav, sr, f"key-{len(wav)}-{sr}"

    def _get_resolved_ref_audio_artifact_key(self, _key: str):
        return None


def _adapter(ckpt: Path, tokenizer, waveforms):
    from vllm_omni.entrypoints.openai.tts_adapters.base import TTSCapabilities
    from vllm_omni.entrypoints.openai.tts_adapters.qwen3_tts import Qwen3TTSAdapter
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig

    hf_config = Qwen3TTSConfig.from_pretrained(str(ckpt))
    engine_client = SimpleNamespace(model_config=SimpleNamespace(hf_config=hf_config, model=str(ckpt)))
    server = _Server(engine_client, tokenizer, waveforms)
    adapter = Qwen3TTSAdapter(SimpleNamespace(server=server, engine_client=engine_client))
    server.adapter = adapter
    talker = hf_config.talker_config
    speakers = list(getattr(talker, "spk_id", None) or {})
    languages = getattr(talker, "codec_language_id", None) or {}
    adapter.capabilities = TTSCapabilities(
        supported_speakers=frozenset(s.lower() for s in speakers),
        supported_languages=frozenset(str(k).title() for k in languages) | {"Auto"},
        codec_frame_rate=12.5,
        default_speaker=speakers[0].lower() if speakers else None,
    )
    return adapter


def _wav_bytes(wav: np.ndarray, sr: int) -> str:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, wav, sr, format="WAV", subtype="FLOAT")
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode()


def _cases(task: str, speakers: tuple[str, ...], wav: np.ndarray, sr: int) -> list[tuple[str, dict, TTSRequest]]:
    """(name, OpenAI request fields, our TTSRequest) per way this checkpoint's task is asked for."""
    ref = _wav_bytes(wav, sr)
    if task == "Base":
        return [
            (
                "Base in-context clone",
                dict(task_type="Base", ref_audio=ref, ref_text=REF_TEXT, x_vector_only_mode=False, seed=7),
                TTSRequest("v", TEXT, ref_audio=wav, ref_sample_rate=sr, ref_text=REF_TEXT, seed=7),
            ),
            (
                "Base x-vector only (no transcript)",
                dict(task_type="Base", ref_audio=ref, x_vector_only_mode=True, language="English"),
                TTSRequest("v", TEXT, ref_audio=wav, ref_sample_rate=sr, language="English"),
            ),
            (
                "Base with a max_new_tokens cap",
                dict(task_type="Base", ref_audio=ref, ref_text=REF_TEXT, x_vector_only_mode=False, max_new_tokens=40),
                TTSRequest("v", TEXT, ref_audio=wav, ref_sample_rate=sr, ref_text=REF_TEXT, max_new_tokens=40),
            ),
        ]
    if task == "CustomVoice":
        voice = speakers[-1] if speakers else None
        return [
            (f"CustomVoice voice {voice}", dict(task_type="CustomVoice", voice=voice, language="Chinese", seed=3),
             TTSRequest("v", TEXT, voice=voice, language="Chinese", seed=3)),
            ("CustomVoice default voice", dict(task_type="CustomVoice"), TTSRequest("v", TEXT)),
        ]
    return [("VoiceDesign instruction", dict(task_type="VoiceDesign", instructions="A calm, low voice."),
             TTSRequest("v", TEXT, instruct="A calm, low voice."))]


# Not compared: the reference payload (compared as samples) and the server's bookkeeping for voices
# uploaded to it (a cache key, an upload time: None for a checkpoint's own speakers).
_NOT_COMPARED = ("ref_audio", "ref_audio_cache_key", "voice_created_at")


def _plain(info: dict) -> dict:
    return {k: v for k, v in info.items() if k not in _NOT_COMPARED}


def _ref_samples(info: dict) -> np.ndarray | None:
    ref = (info.get("ref_audio") or [None])[0]
    if not ref:
        return None
    payload = ref[0]
    if isinstance(payload, dict) and payload.get("__ndarray__"):
        return np.frombuffer(payload["data"], dtype=payload["dtype"])
    return np.asarray(payload, dtype=np.float32)


def _server_sampling(adapter, sp_list: list, request, prompt: dict) -> list:
    """What the server does to the stage-0 params: the adapter's overrides, then an explicit request seed."""
    out = adapter.apply_sampling_overrides(sp_list, request, prompt)
    if request.seed is not None:
        out = copy.deepcopy(out)
        out[0].seed = request.seed
        if out[0].extra_args is None:
            out[0].extra_args = {}
        out[0].extra_args["tts_local_seed"] = request.seed
    return out


def _sampling_figures(sp) -> dict:
    return {
        "max_tokens": sp.max_tokens,
        "min_tokens": sp.min_tokens,
        "seed": sp.seed,
        "tts_local_seed": (sp.extra_args or {}).get("tts_local_seed"),
        "temperature": sp.temperature,
        "top_k": sp.top_k,
    }


def run(checkpoint: Path, *, seed: int = 0) -> list[Check]:
    """One Check per compared figure and case; `seed` draws the reference waveform."""
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    from vllm import SamplingParams
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest

    from omnicli.vllm_omni.requests import REF_SAMPLE_RATE, Qwen3Checkpoint, Qwen3RequestBuilder, load_tokenizer

    ckpt = Qwen3Checkpoint.read(Path(checkpoint))
    tokenizer = load_tokenizer(ckpt.path)
    rng = np.random.default_rng(seed)
    # At 24 kHz: no resampling on either side.
    wav = (0.1 * rng.standard_normal(int(1.3 * REF_SAMPLE_RATE))).astype(np.float32)
    cases = _cases(ckpt.task_type, ckpt.speakers, wav, REF_SAMPLE_RATE)
    waveforms = {c[1]["ref_audio"]: (wav, REF_SAMPLE_RATE) for c in cases if "ref_audio" in c[1]}
    adapter = _adapter(ckpt.path, tokenizer, waveforms)
    defaults = [SamplingParams(**STAGE0_DEFAULTS), SamplingParams(temperature=0.0, max_tokens=65536)]
    ours = Qwen3RequestBuilder(ckpt, tokenizer, defaults)
    checks: list[Check] = []
    for name, fields, request in cases:
        oai = OpenAICreateSpeechRequest(input=TEXT, **fields)
        problem = adapter.validate(oai)
        if problem:
            checks.append(Check(f"{name}: the adapter accepts it", "mismatch", problem))
            continue
        theirs = asyncio.run(adapter.build(oai, copy.deepcopy(defaults), has_inline_ref_audio="ref_audio" in fields))
        built = ours.build(request)
        t_sp = _server_sampling(adapter, copy.deepcopy(defaults), oai, theirs.prompt)
        checks += [
            _check_prompt_length(name, theirs.prompt, built.prompt),
            _check_information(name, theirs.prompt, built.prompt),
            *_check_reference(name, theirs.prompt, built.prompt),
            _check_sampling(name, t_sp[0], built.sampling_params_list[0]),
            _check_length_finish(name, adapter, theirs.prompt, built),
        ]
    if ckpt.task_type == "Base":
        checks.append(_check_resampling(ours, adapter, rng))
    return checks


def _check_prompt_length(name: str, theirs: dict, ours: dict) -> Check:
    t_len, o_len = len(theirs["prompt_token_ids"]), len(ours["prompt_token_ids"])
    return Check(f"{name}: placeholder prompt length", verdict(t_len == o_len), f"{o_len} vs adapter {t_len}")


def _check_information(name: str, theirs: dict, ours: dict) -> Check:
    t_plain, o_plain = _plain(theirs["additional_information"]), _plain(ours["additional_information"])
    keys = sorted(set(t_plain) | set(o_plain))
    differ = [k for k in keys if t_plain.get(k) != o_plain.get(k)]
    detail = ", ".join(f"{k}: ours {o_plain.get(k)!r} vs {t_plain.get(k)!r}" for k in differ)
    return Check(f"{name}: additional_information", verdict(not differ), f"{len(keys) - len(differ)}/{len(keys)} "
                 "keys equal", f"differ: {detail}" if differ else "")


def _check_reference(name: str, theirs: dict, ours: dict) -> list[Check]:
    from omnicli.vllm_omni.requests import REF_SAMPLE_RATE

    t_ref, o_ref = _ref_samples(theirs["additional_information"]), _ref_samples(ours["additional_information"])
    if t_ref is None and o_ref is None:
        return []
    if t_ref is not None and o_ref is not None and t_ref.shape == o_ref.shape:
        diff = float(np.max(np.abs(t_ref - o_ref))) if t_ref.size else 0.0
    else:
        diff = float("inf")
    sizes = f"{0 if o_ref is None else o_ref.size} vs adapter {0 if t_ref is None else t_ref.size} samples"
    return [Check(f"{name}: reference samples", verdict(diff == 0.0),
                  f"{sizes} at {REF_SAMPLE_RATE} Hz, max |diff| {diff:g}")]


def _check_sampling(name: str, theirs: Any, ours: Any) -> Check:
    t_fig, o_fig = _sampling_figures(theirs), _sampling_figures(ours)
    return Check(f"{name}: stage-0 sampling", verdict(t_fig == o_fig), ", ".join(f"{k}={v}" for k, v in o_fig.items()),
                 "" if t_fig == o_fig else f"adapter: {t_fig}")


def _check_length_finish(name: str, adapter: Any, theirs: dict, built: Any) -> Check:
    """A talker that stops at its budget: the adapter raises for Base and for the automatic budget."""
    from vllm_omni.entrypoints.openai.tts_adapters.base import TTSGenerationError

    from omnicli.vllm_omni.requests import length_finish_error

    try:
        adapter.validate_generation(theirs["additional_information"], stage0_finish_reason="length",
                                    output_tokens=built.max_tokens or 0)
        theirs_rejects = False
    except TTSGenerationError:
        theirs_rejects = True
    ours_rejects = length_finish_error(built, built.max_tokens or 0) is not None
    if built.explicit_cap and theirs_rejects and not ours_rejects:
        return Check(f"{name}: a length finish", "skipped", "adapter: incomplete (error); ours: kept, hit_cap",
                     "by design: an offline max_new_tokens is a cap the user chose (docs/vllm-omni.md)")
    said = {True: "error", False: "audio kept"}
    return Check(f"{name}: a length finish", verdict(theirs_rejects == ours_rejects),
                 f"{said[ours_rejects]} vs adapter {said[theirs_rejects]}")


def _check_resampling(ours: Any, adapter: Any, rng: np.random.Generator) -> Check:
    """A 16 kHz reference reaches the talker at 24 kHz with the frame count the adapter estimates."""
    from omnicli.vllm_omni.requests import REF_SAMPLE_RATE

    sr16 = 16000
    wav16 = (0.1 * rng.standard_normal(int(1.3 * sr16))).astype(np.float32)
    built = ours.build(TTSRequest("v", TEXT, ref_audio=wav16, ref_sample_rate=sr16, ref_text=REF_TEXT))
    got = _ref_samples(built.prompt["additional_information"])
    frames = built.prompt["additional_information"]["ref_code_length"][0]
    want = adapter._estimate_ref_code_len([wav16, sr16])
    ok = got is not None and got.size == math.ceil(wav16.size * REF_SAMPLE_RATE / sr16) and frames == want
    return Check("16 kHz reference resampled to 24 kHz", verdict(ok),
                 f"{0 if got is None else got.size} samples, {frames} codec frames vs adapter {want}")
