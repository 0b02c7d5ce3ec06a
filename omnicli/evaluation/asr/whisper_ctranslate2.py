"""faster-whisper (CTranslate2): one greedy 30 s window per clip, batched."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from omnicli.evaluation.asr.base import WHISPER_GREEDY_SETTINGS, WINDOW_SAMPLES, AsrBackend, AsrError, AsrSetupError


class FasterWhisperBackend(AsrBackend):
    """Decodes like `WhisperModel.transcribe` does for one window, but with
    seed-tts-eval's settings rather than faster-whisper's defaults (beam 5,
    temperature fallback, no-speech and log-prob filters): greedy, language
    forced, no timestamps, no previous text, no VAD. Calling CTranslate2's
    `generate` directly lets several clips share one batch."""

    backend = "faster-whisper"

    def __init__(
        self,
        *,
        model: str,
        language: str,
        device: str,
        max_new_tokens: int | None = None,
        compute_type: str | None = None,
    ):
        import ctranslate2

        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        elif device == "cuda" and ctranslate2.get_cuda_device_count() == 0:
            raise AsrSetupError(
                "--device cuda was asked for but CTranslate2 sees no CUDA GPU (use --device cpu or auto)")
        super().__init__(model=model, language=language, device=device, max_new_tokens=max_new_tokens)
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.compute_type = compute_type or ("float16" if device == "cuda" else "int8")
        try:
            self._model = WhisperModel(model, device=device, compute_type=self.compute_type, local_files_only=True)
        except Exception as exc:
            raise AsrError(f"faster-whisper could not load {model}: {exc}") from exc
        multilingual = self._model.model.is_multilingual
        if language != "en" and not multilingual:
            raise AsrSetupError(f"{model} is an English-only Whisper model; it cannot transcribe language {language!r}")
        self._tokenizer = Tokenizer(self._model.hf_tokenizer, multilingual, task="transcribe", language=language)
        self._prompt = self._model.get_prompt(self._tokenizer, previous_tokens=[], without_timestamps=True)
        self._suppress = get_suppressed_tokens(self._tokenizer, [-1])
        limit = self._model.max_length
        self._max_length = min(limit, len(self._prompt) + max_new_tokens) if max_new_tokens else limit

    def _features(self, clip: np.ndarray) -> np.ndarray:
        # Pad the audio (not the features) to 30 s, as Whisper's reference front end does.
        audio = np.zeros(WINDOW_SAMPLES, dtype=np.float32)
        clip = np.asarray(clip, dtype=np.float32)[:WINDOW_SAMPLES]
        audio[: clip.shape[0]] = clip
        feats = self._model.feature_extractor(audio, padding=0)
        return feats[:, : self._model.feature_extractor.nb_max_frames]

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        feats = np.stack([self._features(clip) for clip in clips])
        encoded = self._model.encode(feats)
        results = self._model.model.generate(
            encoded,
            [list(self._prompt) for _ in clips],
            beam_size=1,
            max_length=self._max_length,
            suppress_blank=True,
            suppress_tokens=self._suppress,
            sampling_topk=1,  # argmax: greedy
        )
        return [self._tokenizer.decode(result.sequences_ids[0]).strip() for result in results]

    def decoding_settings(self) -> dict:
        return {
            **WHISPER_GREEDY_SETTINGS,
            "vad_filter": False,
            "max_new_tokens": self._max_length - len(self._prompt),
            "compute_type": self.compute_type,
        }


def load(model: str, *, lang: str, device: str, max_new_tokens: int | None) -> FasterWhisperBackend:
    """The ASR registry's loader (omnicli.evaluation.asr): locates the weights, then loads them."""
    from omnicli.evaluation.asr.locate import locate_ctranslate2

    return FasterWhisperBackend(model=str(locate_ctranslate2(model)), language=lang, device=device,
                                max_new_tokens=max_new_tokens)
