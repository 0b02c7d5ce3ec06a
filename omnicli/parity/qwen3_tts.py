"""`omni models verify qwen3-tts`: our requests against vLLM-Omni's own server code, on the same inputs.

vLLM-Omni's server turns an OpenAI speech request into an engine request in
`OmniOpenAIServingSpeech._prepare_speech_generation`: its Qwen3-TTS adapter
(`tts_adapters/qwen3_tts.py`: `build`, `apply_sampling_overrides`) and then
the server's own seed step. We run that method in-process on a stand-in for
the server object (no HTTP, no engine: the checkpoint's config and tokenizer
and the resolved stage configs are all it reads) and compare, per task type
the checkpoint serves, what it hands to the engine with what our engine's
request builder builds: the placeholder prompt length, every
`additional_information` value, the reference samples, the stage-0 sampling
(budget, minimum, seed and the code predictor's seed) and the rule for a
talker that ends by length.

Both sides read a deploy config, resolved by vLLM-Omni's own config loader
for this checkpoint: the server the deploy file itself (the packaged
qwen3_tts.yaml, or `deploy_config`), our side the overlay omni's qwen3-tts
preset makes of it, as the engine does. Nothing compared is a copy: the
stage-0 defaults come from each side's resolved stage 0, the codec budgets
from the talker stage's `additional_config` (the adapter reads the stage the
server found; we read the overlay's), the seed step is the server's.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from omnicli.engine.request import TTSRequest
from omnicli.parity.checks import Check, verdict

TEXT = "Hello there, how are you today?"
REF_TEXT = "The birch canoe slid on the smooth planks."
PRESET = "qwen3-tts"  # the profile whose overlay our side resolves (the engine's default for this family)


class _ServerState:
    """The attributes vLLM-Omni's speech server reads on the path compared, for one checkpoint.

    The methods that decide what the engine gets (request preparation, the TTS stage lookup, the
    model type) are the server's own, borrowed by `_server_type`; the rest answers as a server with
    no uploaded voices and no request log would."""

    def __init__(self, engine_client, tokenizer, waveforms: dict[str, tuple[np.ndarray, int]]):
        self.engine_client = engine_client
        self.model_config = SimpleNamespace(async_chunk=True)  # only the outputs' kind depends on it: not compared
        self.uploaded_speakers: dict = {}
        self.uploaded_speakers_dir = None
        self.request_logger = None
        self._speech_output_policies: dict = {}
        self._tts_tokenizer = None  # the adapter loads it, as the server does
        self._tts_executor = None
        self._max_instructions_length = 4096
        self._tokenizer = tokenizer
        self.adapter: Any = None  # set once the adapter over this server exists
        self._waveforms = waveforms

    def _get_tts_adapter(self):
        return self.adapter

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


def _server_type() -> type:
    from vllm_omni.entrypoints.openai.serving_speech import OmniOpenAIServingSpeech as Real

    borrowed = ("_prepare_speech_generation", "_find_tts_stage", "_detect_tts_model_type",
                "_validate_speech_sample_rate", "_log_request", "_refresh_uploaded_speakers")
    return type("_Server", (_ServerState,), {name: getattr(Real, name) for name in borrowed})


class _Captured:
    """The engine client's `generate`, kept: what the server would submit."""

    def __init__(self) -> None:
        self.prompt: dict = {}
        self.sampling_params_list: list = []

    def generate(self, *, prompt, sampling_params_list, **_ignored):
        self.prompt, self.sampling_params_list = prompt, sampling_params_list


def resolve_stages(ckpt: Path, deploy: Path) -> list:
    """The stage configs vLLM-Omni resolves for `ckpt` under the deploy file `deploy` (as AsyncOmni does)."""
    from vllm_omni.engine.omni_engine_base import load_and_resolve_stage_configs

    resolution = load_and_resolve_stage_configs(str(ckpt), {}, trust_remote_code=False,
                                                deploy_config_path=str(deploy), stage_overrides=None,
                                                strategy_config_path=None)
    return list(resolution.stage_configs)


def stage_defaults(stages: list) -> list:
    """Each stage's default sampling params, made as vLLM-Omni's stage runtime makes them."""
    from vllm_omni.config.omni_config import BaseVllmOmniStageConfig
    from vllm_omni.engine.stage_init_utils import (
        extract_legacy_stage_metadata,
        extract_stage_metadata_from_omni_stage_config,
    )

    return [(extract_stage_metadata_from_omni_stage_config(s) if isinstance(s, BaseVllmOmniStageConfig)
             else extract_legacy_stage_metadata(s)).default_sampling_params for s in stages]


def _adapter(ckpt: Path, tokenizer, waveforms, stages: list, defaults: list):
    """vLLM-Omni's Qwen3-TTS adapter over a stand-in server whose engine runs `stages`."""
    from vllm_omni.entrypoints.openai.tts_adapters.base import TTSCapabilities
    from vllm_omni.entrypoints.openai.tts_adapters.qwen3_tts import Qwen3TTSAdapter
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig

    hf_config = Qwen3TTSConfig.from_pretrained(str(ckpt))
    engine_client = SimpleNamespace(model_config=SimpleNamespace(hf_config=hf_config, model=str(ckpt)),
                                    stage_configs=stages, default_sampling_params_list=defaults,
                                    errored=False, generate=_Captured().generate)
    server = _server_type()(engine_client, tokenizer, waveforms)
    server._tts_stage = server._find_tts_stage()  # the stage whose additional_config the adapter reads
    server._tts_model_type = server._detect_tts_model_type()
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
    return adapter, server


async def _served(server, oai, has_ref: bool) -> tuple[dict, list]:
    """What the server hands to its engine for `oai`: (prompt, per-stage sampling params)."""
    captured = _Captured()
    server.engine_client.generate = captured.generate
    await server._prepare_speech_generation(oai, request_id="verify", has_inline_ref_audio=has_ref)
    return captured.prompt, captured.sampling_params_list


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


def _sampling_figures(sp) -> dict:
    return {
        "max_tokens": sp.max_tokens,
        "min_tokens": sp.min_tokens,
        "seed": sp.seed,
        "tts_local_seed": (sp.extra_args or {}).get("tts_local_seed"),
        "temperature": sp.temperature,
        "top_k": sp.top_k,
    }


def _our_overlay(ckpt: Path, base: Path | None, folder: Path) -> Path:
    """The deploy overlay the engine writes for the preset (over `base`, else the family's packaged file)."""
    from omnicli.profile import load_profile
    from omnicli.vllm_omni.overlay import build_overlay, write_overlay

    overrides = [f"vllm_omni.base_deploy_config={base}"] if base is not None else []
    return write_overlay(build_overlay(load_profile(PRESET, overrides=overrides, platform="cpu"), ckpt), folder)


def run(checkpoint: Path, *, seed: int = 0, deploy_config: Path | None = None) -> list[Check]:
    """One Check per compared figure and case; `seed` draws the reference waveform.

    `deploy_config`: the deploy file the server runs (and our overlay inherits); the packaged one by default."""
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest
    from vllm_omni.entrypoints.utils import coerce_param_message_types

    from omnicli.profile.deploy_files import deploy_path
    from omnicli.vllm_omni.requests import REF_SAMPLE_RATE, Qwen3Checkpoint, load_tokenizer
    from omnicli.vllm_omni.spec import QWEN3_TTS

    ckpt = Qwen3Checkpoint.read(Path(checkpoint))
    served_deploy = Path(deploy_config) if deploy_config is not None else deploy_path(QWEN3_TTS.deploy_yaml)
    served_stages = resolve_stages(ckpt.path, served_deploy)
    with tempfile.TemporaryDirectory(prefix="omni-verify-") as folder:
        our_stages = resolve_stages(ckpt.path, _our_overlay(ckpt.path, deploy_config, Path(folder)))
    served_defaults, our_defaults = stage_defaults(served_stages), stage_defaults(our_stages)
    tokenizer = load_tokenizer(ckpt.path)
    rng = np.random.default_rng(seed)
    # At 24 kHz: no resampling on either side.
    wav = (0.1 * rng.standard_normal(int(1.3 * REF_SAMPLE_RATE))).astype(np.float32)
    cases = _cases(ckpt.task_type, ckpt.speakers, wav, REF_SAMPLE_RATE)
    waveforms = {c[1]["ref_audio"]: (wav, REF_SAMPLE_RATE) for c in cases if "ref_audio" in c[1]}
    adapter, server = _adapter(ckpt.path, tokenizer, waveforms, served_stages, served_defaults)
    # the engine's builder, made as the engine makes it (its defaults are DELTA outputs, as it streams)
    ours = QWEN3_TTS.make_builder(ckpt.path, None, coerce_param_message_types(list(our_defaults), True), None,
                                  our_stages)
    checks: list[Check] = [_check_defaults(served_defaults[0], our_defaults[0], served_deploy),
                           _check_budgets(adapter.codec_budgets, ours.budgets)]
    for name, fields, request in cases:
        oai = OpenAICreateSpeechRequest(input=TEXT, **fields)
        try:
            prompt, sp_list = asyncio.run(_served(server, oai, "ref_audio" in fields))
        except ValueError as exc:  # the server's answer to a request it refuses (HTTP 400)
            checks.append(Check(f"{name}: the server accepts it", "mismatch", str(exc)))
            continue
        built = ours.build(request)
        checks += [
            _check_prompt_length(name, prompt, built.prompt),
            _check_information(name, prompt, built.prompt),
            *_check_reference(name, prompt, built.prompt),
            _check_sampling(name, sp_list[0], built.sampling_params_list[0]),
            _check_length_finish(name, adapter, prompt, built),
        ]
    if ckpt.task_type == "Base":
        checks.append(_check_resampling(ours, adapter, rng))
    return checks


def _defaults_figures(sp) -> dict:
    return {k: getattr(sp, k) for k in ("temperature", "top_k", "top_p", "repetition_penalty", "max_tokens",
                                        "min_tokens", "seed", "stop_token_ids")}


def _check_defaults(served: Any, ours: Any, deploy: Path) -> Check:
    """Stage 0's defaults: the server's (its deploy file) against the engine's (the preset's overlay of it)."""
    t_fig, o_fig = _defaults_figures(served), _defaults_figures(ours)
    differ = [k for k in t_fig if t_fig[k] != o_fig[k]]
    return Check("stage-0 default sampling (our overlay vs the server's deploy file)", verdict(not differ),
                 ", ".join(f"{k}={o_fig[k]} vs {t_fig[k]}" for k in t_fig),
                 f"{deploy.name}; differ: {', '.join(differ)}" if differ else deploy.name)


def _check_budgets(theirs: dict, ours: dict) -> Check:
    """The per-task codec budgets: the adapter's (from the server's talker stage) against the engine's."""
    def text(budgets: dict) -> dict:
        return {task: f"{b.frames_per_text_token:g}/tok, min {b.min_frames}" for task, b in sorted(budgets.items())}

    t_fig, o_fig = text(theirs), text(ours)
    return Check("codec budgets per task (talker additional_config)", verdict(t_fig == o_fig),
                 "; ".join(f"{task}: {o_fig.get(task)} vs adapter {t_fig.get(task)}" for task in sorted(set(t_fig)
                                                                                                    | set(o_fig))))


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
    return Check(f"{name}: stage-0 sampling", verdict(t_fig == o_fig),
                 ", ".join(f"{k}={o_fig[k]} vs {t_fig[k]}" for k in o_fig))


def _check_length_finish(name: str, adapter: Any, theirs: dict, built: Any) -> Check:
    """A talker that stops at its budget: the adapter raises for Base and for the automatic budget."""
    from vllm_omni.entrypoints.openai.tts_adapters.base import TTSGenerationError

    from omnicli.vllm_omni.requests import length_finish_error
    from omnicli.vllm_omni.spec import QWEN3_TTS

    try:
        adapter.validate_generation(theirs["additional_information"], stage0_finish_reason="length",
                                    output_tokens=built.max_tokens or 0)
        theirs_rejects = False
    except TTSGenerationError:
        theirs_rejects = True
    ours_rejects = length_finish_error(QWEN3_TTS, built, built.max_tokens or 0) is not None
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
