"""openai-whisper: one greedy 30 s window per clip, clips decoded as a batch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from omnicli.evaluation.asr.base import WHISPER_GREEDY_SETTINGS, AsrBackend, AsrError, AsrSetupError


class OpenAIWhisperBackend(AsrBackend):
    """`whisper.decode` on padded 30 s log-mels: greedy (temperature 0, no
    fallback, no beam), language forced, task transcribe, no timestamps, no
    previous-text prompt: the single-window decoding seed-tts-eval does with
    transformers' `generate`. fp16 on CUDA, fp32 on CPU."""

    backend = "openai-whisper"

    def __init__(self, *, model: str, language: str, device: str, max_new_tokens: int | None = None):
        super().__init__(model=model, language=language, device=device, max_new_tokens=max_new_tokens)
        import whisper

        self._whisper = whisper
        try:
            self._model = whisper.load_model(model, device=device)
        except Exception as exc:
            raise AsrError(f"openai-whisper could not load {model}: {exc}") from exc
        if language != "en" and not self._model.is_multilingual:
            raise AsrSetupError(f"{model} is an English-only Whisper model; it cannot transcribe language {language!r}")
        self.fp16 = device == "cuda"
        self._options = whisper.DecodingOptions(
            task="transcribe",
            language=language,
            temperature=0.0,
            sample_len=max_new_tokens,
            beam_size=None,  # greedy
            best_of=None,
            prompt=None,
            without_timestamps=True,
            fp16=self.fp16,
        )

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        import torch

        whisper = self._whisper
        n_mels = self._model.dims.n_mels
        mels = torch.stack(
            [
                whisper.log_mel_spectrogram(whisper.pad_or_trim(np.asarray(clip, dtype=np.float32)), n_mels=n_mels)
                for clip in clips
            ]
        ).to(self.device)
        with torch.inference_mode():
            results = whisper.decode(self._model, mels, self._options)
        return [result.text.strip() for result in results]

    def decoding_settings(self) -> dict:
        return {
            **WHISPER_GREEDY_SETTINGS,
            "max_new_tokens": self.max_new_tokens or self._model.dims.n_text_ctx // 2,
            "fp16": self.fp16,
        }


def load(model: str, *, lang: str, device: str, max_new_tokens: int | None) -> OpenAIWhisperBackend:
    """The ASR registry's loader (omnicli.evaluation.asr): locates the weights, then loads them."""
    from omnicli.evaluation.asr.base import resolve_torch_device
    from omnicli.evaluation.asr.locate import locate_openai_whisper

    path = locate_openai_whisper(model)
    return OpenAIWhisperBackend(model=str(path), language=lang, device=resolve_torch_device(device),
                                max_new_tokens=max_new_tokens)
