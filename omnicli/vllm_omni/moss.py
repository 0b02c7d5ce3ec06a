"""MOSS-TTS-Local v1.5 requests as vLLM-Omni's server builds them, without the HTTP layer.

The rules are those of vLLM-Omni's serving adapter for the "local" variant
(`vllm_omni/entrypoints/openai/tts_adapters/moss_tts.py`):

- every request clones a reference voice (the adapter refuses one without
  `ref_audio`); the reference is encoded into RVQ codes by the checkpoint's
  own processor and audio tokenizer, after resampling to the 24 kHz working
  rate (and on to the tokenizer's rate where its config names another);
- with the reference's transcript the request is a *continuation*: the
  user message carries `ref_text + " " + text`, the assistant message the
  reference codes, and the processor runs in `continuation` mode; without a
  transcript it is a *generation*: the user message carries the text and the
  reference, the processor runs in `generation` mode;
- the processor returns one `(L, 1 + n_vq)` grid: column 0 becomes the
  prompt's token ids, the rest `additional_information["codes"]["ref"]`;
  a named `max_new_tokens` becomes `max_new_frames` and stage 0's
  `max_tokens`; the seed (the request's, else the deploy config's) goes to
  `additional_information["seed"]`, as MOSS samples inside its model.

Every prompt needs the checkpoint's processor, which is Python code shipped
with the checkpoint (`processing_moss_tts.py`, named by `auto_map`): omni
refuses such code by default (omnicli.model_files). It is imported only from
the user's checkpoint folder, never from the network, and only when the
profile opts in (`model_options: {trust_remote_code: true}`). The processor
sits behind `MossProcessor`, the few members this module calls, so the rules
above are tested with a stand-in (tests/test_vllm_omni_moss.py); no MOSS
checkpoint or processor code was available here (docs/vllm-omni.md).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from omnicli.engine.request import TTSRequest
from omnicli.errors import UsageError
from omnicli.vllm_omni.requests import BuiltRequest, RequestInvalid

TRUST_OPTION = "trust_remote_code"  # model_options key a MOSS profile sets to true to run the processor
WORKING_RATE = 24000  # the rate Local v1.5 encodes references at (its output codec runs at 48 kHz)
PROCESSOR_FILE = "processing_moss_tts.py"


class MossProcessor(Protocol):
    """What omni calls of a MOSS-TTS-Local checkpoint's own processor."""

    model_config: Any  # reads n_vq and sampling_rate (the audio tokenizer's rate)

    def build_user_message(self, **fields: Any) -> Any: ...

    def build_assistant_message(self, *, audio_codes_list: list[Any]) -> Any: ...

    def __call__(self, *, conversations: list[list[Any]], mode: str) -> Mapping[str, Any]: ...

    def encode_audios_from_wav(self, wavs: list[Any], *, sampling_rate: int, n_vq: int) -> list[Any]: ...


ProcessorLoader = Callable[[Path, "Path | None"], MossProcessor]


class RemoteCodeNotTrusted(UsageError):
    """A MOSS checkpoint's processor is code from the checkpoint folder, and the profile did not opt in."""


def remote_code_trusted(options: Mapping[str, Any] | None) -> bool:
    """True only for an explicit `model_options.trust_remote_code: true` (a string or 1 is not consent)."""
    return (options or {}).get(TRUST_OPTION) is True


def check_trusted(ckpt: Path, options: Mapping[str, Any] | None) -> None:
    """RemoteCodeNotTrusted (exit 2) unless the profile opted in to the checkpoint's own processor code."""
    if not remote_code_trusted(options):
        raise RemoteCodeNotTrusted(
            f"{ckpt}: MOSS-TTS-Local builds every prompt with the checkpoint's own processor "
            f"({PROCESSOR_FILE}, Python code from that folder), which omni does not run unless the profile says so: "
            f"add `model_options: {{{TRUST_OPTION}: true}}` to your profile if you trust this checkpoint "
            "(docs/vllm-omni.md)")


def load_checkpoint_processor(ckpt: Path, codec: Path | None) -> MossProcessor:
    """The checkpoint's processor from its own folder (never the network), with its audio tokenizer.

    transformers imports `processing_moss_tts.py` from `ckpt` (the caller has checked the profile's
    consent). Where the processor did not load an audio tokenizer itself, the located one (`codec`,
    the profile's codec_path) is attached, as the adapter expects `processor.audio_tokenizer`.
    """
    from transformers import AutoModel, AutoProcessor

    proc = AutoProcessor.from_pretrained(str(ckpt), trust_remote_code=True, local_files_only=True)
    if getattr(proc, "audio_tokenizer", None) is None and codec is not None:
        proc.audio_tokenizer = AutoModel.from_pretrained(str(codec), trust_remote_code=True, local_files_only=True)
    if getattr(proc, "audio_tokenizer", None) is not None:
        proc.audio_tokenizer = proc.audio_tokenizer.eval()
    return proc


def _resample(wav: np.ndarray, src: int, dst: int) -> np.ndarray:
    """(channels, T) float32 resampled with soxr (the adapter uses torchaudio; omni resamples itself)."""
    import soxr

    if src == dst:
        return wav
    return np.ascontiguousarray(soxr.resample(wav.T, src, dst).T.astype(np.float32, copy=False))


class MossRequestBuilder:
    """Builds MOSS-TTS-Local v1.5 requests for one checkpoint and profile.

    `processor` is the checkpoint's own (or a stand-in in unit tests); `defaults` the engine's
    per-stage default sampling params (already DELTA); `options` the profile's `model_options`
    (`language`).
    """

    def __init__(self, processor: MossProcessor, defaults: list, options: Mapping[str, Any] | None = None):
        cfg = processor.model_config
        n_vq = getattr(cfg, "n_vq", None)
        if not isinstance(n_vq, int) or n_vq <= 0:
            raise RequestInvalid(f"the MOSS processor's model_config has no usable n_vq ({n_vq!r})")
        self.processor = processor
        self.n_vq = n_vq
        self.tokenizer_rate = int(getattr(cfg, "sampling_rate", None) or WORKING_RATE)
        self.defaults = list(defaults)
        self.options = dict(options or {})

    def encode_reference(self, pcm: np.ndarray, sample_rate: int) -> Any:
        """The reference as (frames, n_vq) int64 RVQ codes: at most two channels, 24 kHz, then the
        tokenizer's own rate, encoded by the processor (as the adapter's reference encoder on CPU)."""
        import torch

        wav = np.asarray(pcm, dtype=np.float32)
        wav = wav[None, :] if wav.ndim == 1 else wav.T  # our PCM is (T,) or (T, channels)
        wav = _resample(np.ascontiguousarray(wav[:2]), int(sample_rate), WORKING_RATE)
        wav = _resample(wav, WORKING_RATE, self.tokenizer_rate)
        with torch.no_grad():
            (codes,) = self.processor.encode_audios_from_wav(
                [torch.from_numpy(wav)], sampling_rate=self.tokenizer_rate, n_vq=self.n_vq)
        codes = torch.as_tensor(codes).to(torch.int64)
        if codes.ndim != 2 or int(codes.shape[1]) != self.n_vq or codes.shape[0] == 0:
            raise RequestInvalid(f"the MOSS audio tokenizer gave codes of shape {tuple(codes.shape)}, "
                                 f"not (frames, {self.n_vq})")
        return codes

    def conversation(self, request: TTSRequest, codes: Any) -> tuple[list[Any], str]:
        """The processor's conversation and mode: continuation with the reference's transcript, else generation."""
        fields: dict[str, Any] = {"text": request.text}
        language = request.language or self.options.get("language")
        if language:
            fields["language"] = language
        ref_text = (request.ref_text or "").strip()
        if ref_text:
            fields["text"] = f"{ref_text} {request.text}"
            user = self.processor.build_user_message(**fields)
            return [user, self.processor.build_assistant_message(audio_codes_list=[codes])], "continuation"
        return [self.processor.build_user_message(**fields, reference=[codes])], "generation"

    def sampling(self, request: TTSRequest) -> list:
        """Stage 0: the named cap as max_tokens (apply_max_new_tokens), the request's seed as its seed."""
        params = [copy.copy(p) for p in self.defaults]
        params[0] = copy.deepcopy(params[0])
        if request.max_new_tokens is not None:
            params[0].max_tokens = int(request.max_new_tokens)
        if request.seed is not None:
            params[0].seed = int(request.seed)
        return params

    def build(self, request: TTSRequest) -> BuiltRequest:
        import torch

        if not request.text or not request.text.strip():
            raise RequestInvalid("input text is empty")
        if request.ref_audio is None:
            raise RequestInvalid("MOSS-TTS-Local clones a voice: the row needs a reference (prompt wav)")
        if not request.ref_sample_rate:
            raise RequestInvalid("reference audio given without its sample rate")
        if np.asarray(request.ref_audio).size == 0:
            raise RequestInvalid("reference audio has no samples")
        codes = self.encode_reference(request.ref_audio, request.ref_sample_rate)
        conversation, mode = self.conversation(request, codes)
        unified = torch.as_tensor(self.processor(conversations=[conversation], mode=mode)["input_ids"][0])
        info: dict[str, Any] = {"codes": {"ref": unified[:, 1:].contiguous().to(torch.int64)}}
        if request.max_new_tokens is not None:
            info["max_new_frames"] = [int(request.max_new_tokens)]
        seed = request.seed if request.seed is not None else getattr(self.defaults[0], "seed", None)
        if seed is not None:
            info["seed"] = [int(seed)]
        params = self.sampling(request)
        return BuiltRequest(
            prompt={"prompt_token_ids": [int(t) for t in unified[:, 0].tolist()], "additional_information": info},
            sampling_params_list=params,
            task_type=mode,
            max_tokens=getattr(params[0], "max_tokens", None),
            explicit_cap=request.max_new_tokens is not None,
            ref_frames=int(codes.shape[0]),
        )


def moss_builder(ckpt: Path, codec: Path | None, defaults: list, options: Mapping[str, Any] | None,
                 stage_configs: Sequence[Any] = (), *,
                 loader: ProcessorLoader = load_checkpoint_processor) -> MossRequestBuilder:
    """The request builder for a MOSS checkpoint (its spec's `request_builder`): consent first, then the
    folder's own processor. `stage_configs` are not read: MOSS's requests take nothing from them."""
    del stage_configs
    check_trusted(ckpt, options)
    if not (ckpt / PROCESSOR_FILE).is_file():
        raise RequestInvalid(f"{ckpt}: no {PROCESSOR_FILE} (the checkpoint's processor) in the folder")
    return MossRequestBuilder(loader(ckpt, codec), defaults, options)
