"""TTSRequest -> the prompt and sampling parameters vLLM-Omni's own server would submit.

Without the HTTP layer, but by the same rules as its serving adapter for
Qwen3-TTS (`vllm_omni/entrypoints/openai/tts_adapters/qwen3_tts.py`):

- `additional_information` holds every value wrapped in a one-item list;
- the task comes from the checkpoint (`tts_model_type`: Base, CustomVoice,
  VoiceDesign); Base clones the row's reference (in-context with its
  transcript, x-vector only without one), CustomVoice speaks a named voice
  (the row's, else the profile's `model_options.voice`, else the
  checkpoint's first), VoiceDesign follows an instruction (the row's
  `instruct`, else the profile's);
- the reference is resampled to 24 kHz here (soxr), so the talker never
  resamples, and travels as raw float32 bytes;
- the placeholder prompt is `[1] * L` with L from vLLM-Omni's own estimator
  (a wrong L gives noise);
- sampling starts from the deploy config's defaults; without an explicit
  `max_new_tokens` the talker budget is the text-scaled ceiling
  `max(min_frames, ceil(rate * text tokens))` per task (read from the
  talker stage's `additional_config` by vLLM-Omni's own loader), clamped by
  the configured `max_tokens`; the seed (the request's, else the deploy
  config's) also seeds the code predictor (`extra_args.tts_local_seed`).

`omni models verify qwen3-tts` (omnicli/parity/qwen3_tts.py) checks each of
these against the adapter itself. Building is CPU work (tokenizing,
resampling): the engine runs it off the event loop.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.engine.request import TTSRequest
from omnicli.vllm_omni.spec import OmniFamilySpec

REF_SAMPLE_RATE = 24000  # what the talker's speaker encoder and codec encoder take
DEFAULT_MAX_NEW_TOKENS = 2048  # the adapter's `max_new_tokens` when a request names none
TASKS = ("Base", "CustomVoice", "VoiceDesign")
TALKER_STAGE = 0  # the stage whose additional_config holds the codec budgets


class RequestInvalid(ValueError):
    """A request this checkpoint cannot serve (the adapter would answer HTTP 400)."""


@dataclass(frozen=True)
class Qwen3Checkpoint:
    """What the request rules read from a Qwen3-TTS checkpoint's config files."""

    path: Path
    task_type: str
    speakers: tuple[str, ...]  # CustomVoice names, in the config's order (the first is the default)
    languages: dict[str, int]  # codec_language_id: lower-case name -> codec id
    spk_is_dialect: dict[str, Any]
    frame_rate: float  # codec frames per second (12.5 for the 12 Hz tokenizer)

    @classmethod
    def read(cls, path: Path) -> Qwen3Checkpoint:
        cfg = json.loads((path / "config.json").read_text())
        talker = cfg.get("talker_config") or {}
        kind = "".join(ch for ch in str(cfg.get("tts_model_type", "")).lower() if ch.isalpha())
        task = {"base": "Base", "customvoice": "CustomVoice", "voicedesign": "VoiceDesign"}.get(kind)
        if task is None:
            raise RequestInvalid(
                f"{path / 'config.json'}: tts_model_type {cfg.get('tts_model_type')!r} is not one of base, "
                "custom_voice, voice_design"
            )
        frame_rate = 12.5
        codec_cfg = path / "speech_tokenizer" / "config.json"
        if codec_cfg.exists():
            c = json.loads(codec_cfg.read_text())
            if c.get("output_sample_rate") and c.get("decode_upsample_rate"):
                frame_rate = c["output_sample_rate"] / c["decode_upsample_rate"]
        return cls(
            path=path,
            task_type=task,
            speakers=tuple(str(s).lower() for s in (talker.get("spk_id") or {})),
            languages={str(k).lower(): int(v) for k, v in (talker.get("codec_language_id") or {}).items()},
            spk_is_dialect=dict(talker.get("spk_is_dialect") or {}),
            frame_rate=float(frame_rate),
        )

    @property
    def language_names(self) -> list[str]:
        return ["Auto", *sorted(name.title() for name in self.languages)]


@dataclass
class BuiltRequest:
    """One request as vLLM-Omni takes it, plus what the engine needs to judge its end."""

    prompt: dict[str, Any]  # {"prompt_token_ids": [1] * L, "additional_information": {...}}
    sampling_params_list: list  # one SamplingParams per stage
    task_type: str
    max_tokens: int | None  # the talker's effective budget
    explicit_cap: bool  # the caller named max_new_tokens (a cap), rather than the automatic budget
    ref_frames: int = 0


def resample_reference(pcm: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mono float32 at 24 kHz (soxr), the rate the talker's encoders take."""
    import soxr

    wav = np.asarray(pcm, dtype=np.float32)
    if wav.ndim == 2:
        wav = wav.mean(axis=1)
    if int(sample_rate) != REF_SAMPLE_RATE:
        wav = soxr.resample(wav, int(sample_rate), REF_SAMPLE_RATE).astype(np.float32, copy=False)
    return np.ascontiguousarray(wav)


def wire_waveform(wav: np.ndarray) -> dict[str, Any]:
    """The raw-bytes form the talker's prompt builder reads (numpy arrays do not cross its IPC as arrays)."""
    wav = np.ascontiguousarray(wav, dtype=np.float32).reshape(-1)
    return {"__ndarray__": True, "data": wav.tobytes(), "dtype": "float32", "shape": [int(wav.size)]}


class Qwen3RequestBuilder:
    """Builds Qwen3-TTS requests for one checkpoint and profile.

    `options` are the profile's `model_options` (`voice`, `language`,
    `instruct`); `defaults` the engine's per-stage default sampling params
    (already DELTA); `tokenizer` the checkpoint's text tokenizer, loaded as
    the talker loads it; `budgets` the per-task codec budgets of the deploy
    config (`codec_budgets`; None: vLLM-Omni's defaults, as for a deploy
    config that sets none).
    """

    def __init__(self, ckpt: Qwen3Checkpoint, tokenizer, defaults: list, options: dict | None = None,
                 budgets: Mapping[str, Any] | None = None):
        self.ckpt = ckpt
        self.tokenizer = tokenizer
        self.defaults = list(defaults)
        self.options = dict(options or {})
        self.budgets = dict(budgets) if budgets is not None else codec_budgets(())

    # -- additional_information ---------------------------------------------------
    def language(self, request: TTSRequest) -> str:
        language = (request.language or self.options.get("language") or "Auto").title()
        if language not in self.ckpt.language_names:
            raise RequestInvalid(
                f"language {language!r} is not supported by this checkpoint (supported: "
                f"{', '.join(self.ckpt.language_names)})"
            )
        return language

    def additional_information(self, request: TTSRequest) -> tuple[dict[str, Any], int]:
        """The list-wrapped `additional_information` and the reference's codec frames (0 without one)."""
        task = self.ckpt.task_type
        if not request.text or not request.text.strip():
            raise RequestInvalid("input text is empty")
        info: dict[str, Any] = {"text": [request.text], "task_type": [task], "language": [self.language(request)]}
        if task == "CustomVoice":
            voice = (
                request.voice or self.options.get("voice") or (self.ckpt.speakers[0] if self.ckpt.speakers else "")
            ).lower()
            if not voice:
                raise RequestInvalid("this CustomVoice checkpoint names no speakers (talker_config.spk_id is empty)")
            if voice not in self.ckpt.speakers:
                raise RequestInvalid(
                    f"voice {voice!r} is not one of this checkpoint's speakers ({', '.join(self.ckpt.speakers)})"
                )
            info["speaker"] = [voice]
        instruct = request.instruct or self.options.get("instruct") or ""
        if task == "VoiceDesign" and not instruct.strip():
            raise RequestInvalid(
                "a VoiceDesign checkpoint needs an instruction (the row's `instruct` or model_options.instruct)"
            )
        info["instruct"] = [instruct]
        frames = 0
        if task == "Base":
            if request.ref_audio is None:
                raise RequestInvalid("a Base checkpoint clones a voice: the row needs a reference (prompt wav)")
            if not request.ref_sample_rate:
                raise RequestInvalid("reference audio given without its sample rate")
            wav = resample_reference(request.ref_audio, request.ref_sample_rate)
            if wav.size == 0:
                raise RequestInvalid("reference audio has no samples")
            ref_text = (request.ref_text or "").strip()
            if ref_text:
                info["ref_text"] = [ref_text]
            info["x_vector_only_mode"] = [not ref_text]  # no transcript: clone the timbre only
            frames = math.ceil(wav.size / REF_SAMPLE_RATE * self.ckpt.frame_rate)
            info["ref_audio"] = [[wire_waveform(wav), REF_SAMPLE_RATE]]
            info["ref_code_length"] = [int(frames)]
        info["max_new_tokens"] = [
            request.max_new_tokens if request.max_new_tokens is not None else DEFAULT_MAX_NEW_TOKENS
        ]
        if task == "VoiceDesign":
            info["non_streaming_mode"] = [True]
        return info, frames

    def prompt_length(self, info: dict[str, Any]) -> int:
        """vLLM-Omni's own estimate of the talker prompt length for `info` (also stores the text ids it computed)."""
        from vllm_omni.model_executor.models.qwen3_tts.prompt_embeds_builder import (
            PRECOMPUTED_TEXT_IDS_KEY,
            Qwen3TTSPromptEmbedsBuilder,
            build_assistant_text,
        )

        assistant_text = build_assistant_text(info["text"][0])
        assistant_ids: list[list[int]] = []

        def tokenize(text: str) -> list[int]:
            ids = self.tokenizer(text, padding=False)["input_ids"]
            if text == assistant_text:
                assistant_ids.append(ids)
            return ids

        length = Qwen3TTSPromptEmbedsBuilder.estimate_prompt_len_from_additional_information(
            additional_information=info,
            task_type=info["task_type"][0],
            tokenize_prompt=tokenize,
            codec_language_id=self.ckpt.languages or None,
            spk_is_dialect=self.ckpt.spk_is_dialect or None,
            estimate_ref_code_len=lambda _ref: (info.get("ref_code_length") or [None])[0],
        )
        if assistant_ids:  # spares the talker tokenizing the same text again
            info[PRECOMPUTED_TEXT_IDS_KEY] = [assistant_ids[0]]
        return int(length)

    # -- sampling -------------------------------------------------------------------
    def text_tokens(self, text: str) -> int:
        try:
            return len(self.tokenizer(text, padding=False)["input_ids"])
        except Exception:  # counting is best effort, as the server's
            return 0

    def sampling(self, request: TTSRequest, task: str) -> tuple[list, int | None, bool]:
        """Per-stage sampling params for `request`: (list, effective talker budget, explicit cap?)."""
        params = [copy.copy(p) for p in self.defaults]
        stage0 = params[0] = copy.deepcopy(params[0])
        configured = getattr(stage0, "max_tokens", None)
        explicit = request.max_new_tokens is not None
        if request.max_new_tokens is not None:
            cap: int | None = int(request.max_new_tokens)
        else:
            budget = self.budgets.get(task)  # vLLM-Omni's Qwen3TTSCodecBudget: its rule, its formula
            n = self.text_tokens(request.text) if budget is not None and budget.enabled else 0
            if budget is not None and n > 0:
                dynamic = budget.frames_for(n)
                cap = min(dynamic, int(configured)) if configured is not None else dynamic
            else:
                cap = int(configured) if configured is not None else None
        if cap is not None:
            cap = max(1, cap)
            stage0.max_tokens = cap
            stage0.min_tokens = min(int(getattr(stage0, "min_tokens", 0) or 0), cap)
        if stage0.extra_args is None:
            stage0.extra_args = {}
        if request.seed is not None:
            stage0.seed = int(request.seed)
            stage0.extra_args["tts_local_seed"] = int(request.seed)
        elif getattr(stage0, "seed", None) is not None:
            stage0.extra_args.setdefault("tts_local_seed", int(stage0.seed))
        return params, cap, explicit

    def build(self, request: TTSRequest) -> BuiltRequest:
        info, frames = self.additional_information(request)
        length = self.prompt_length(info)
        params, cap, explicit = self.sampling(request, info["task_type"][0])
        if cap is not None:
            from vllm_omni.entrypoints.openai.tts_adapters.qwen3_tts import (
                QWEN3_TTS_AUTO_BUDGET_KEY,
                QWEN3_TTS_EFFECTIVE_MAX_TOKENS_KEY,
            )

            info[QWEN3_TTS_EFFECTIVE_MAX_TOKENS_KEY] = [cap]
            if not explicit:
                info[QWEN3_TTS_AUTO_BUDGET_KEY] = [True]
        return BuiltRequest(
            prompt={"prompt_token_ids": [1] * length, "additional_information": info},
            sampling_params_list=params,
            task_type=info["task_type"][0],
            max_tokens=cap,
            explicit_cap=explicit,
            ref_frames=frames,
        )


def length_finish_error(spec: OmniFamilySpec, built: BuiltRequest, output_tokens: int) -> str | None:
    """Why a talker that stopped at its budget gives no valid audio, or None (the adapter's rule).

    The Qwen3-TTS server rejects a Base request that ends by length (its audio
    is incomplete) and any task's under the automatic budget. A cap the caller
    named is a cap: the audio is kept and the request reports `hit_cap`. A
    family whose length end is valid audio (`spec.length_end_is_audio`: MOSS) has no such rule.
    """
    if built.explicit_cap or spec.length_end_is_audio:
        return None
    return (f"Qwen3-TTS {built.task_type} did not emit codec EOS before its token budget "
            f"({output_tokens}/{built.max_tokens} codec tokens); the generated audio is incomplete")


def load_tokenizer(ckpt: Path):
    """The checkpoint's text tokenizer, constructed as the talker constructs it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(ckpt), trust_remote_code=True, use_fast=True, padding_side="left")


def codec_budgets(stage_configs: Sequence[Any]) -> dict[str, Any]:
    """The text-scaled codec budgets per task, read by vLLM-Omni's own adapter code from the talker
    stage's `additional_config` in the resolved deploy config (its defaults where the stage sets none)."""
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()  # the adapter's imports reach torchvision, which a CPU install has not
    from vllm_omni.entrypoints.openai.tts_adapters.qwen3_tts import _stage_additional_config, load_codec_budgets

    talker = next((s for s in stage_configs if getattr(s, "stage_id", None) == TALKER_STAGE), None)
    return load_codec_budgets(_stage_additional_config(talker))


def qwen3_builder(ckpt: Path, codec: Path | None, defaults: list, options: Mapping[str, Any] | None,
                  stage_configs: Sequence[Any] = ()) -> Qwen3RequestBuilder:
    """The Qwen3-TTS request builder for one checkpoint (its spec's `request_builder`; no separate codec)."""
    del codec
    return Qwen3RequestBuilder(Qwen3Checkpoint.read(ckpt), load_tokenizer(ckpt), defaults, dict(options or {}),
                               budgets=codec_budgets(stage_configs))
