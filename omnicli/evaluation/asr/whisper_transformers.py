"""transformers Whisper: the pipeline seed-tts-eval's run_wer.py itself uses."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from omnicli.evaluation.asr.base import SAMPLE_RATE, WHISPER_GREEDY_SETTINGS, AsrBackend, AsrError, AsrSetupError


class TransformersWhisperBackend(AsrBackend):
    """`WhisperProcessor` (pads/cuts to 30 s) + `generate`, greedy
    (num_beams 1, no sampling), language and task forced, fp32 as in
    seed-tts-eval. Loaded with `local_files_only=True` and `trust_remote_code=False`
    (a folder whose config names its own code is refused first, omnicli.model_files)."""

    backend = "transformers"

    def __init__(self, *, model: str, language: str, device: str, max_new_tokens: int | None = None):
        super().__init__(model=model, language=language, device=device, max_new_tokens=max_new_tokens)
        try:
            import torch
            from transformers import WhisperForConditionalGeneration, WhisperProcessor
        except Exception as exc:  # e.g. a torchvision built for another torch breaks the import
            raise AsrSetupError(f"transformers cannot be imported here: {exc}") from exc
        from transformers.utils import logging as hf_logging

        from omnicli.model_files import ModelFileError, refuse_remote_code

        try:
            refuse_remote_code(Path(model))
        except ModelFileError as exc:
            raise AsrSetupError(str(exc)) from None
        hf_logging.set_verbosity_error()  # per-call deprecation chatter would bury the progress bar
        hf_logging.disable_progress_bar()
        try:
            # trust_remote_code=False: transformers never runs the folder's code nor asks on stdin.
            self._processor = WhisperProcessor.from_pretrained(model, local_files_only=True, trust_remote_code=False)
            self._model = WhisperForConditionalGeneration.from_pretrained(
                model, local_files_only=True, trust_remote_code=False, dtype=torch.float32
            ).to(device)  # type: ignore[arg-type]
        except Exception as exc:
            raise AsrError(f"transformers could not load Whisper from {model}: {exc}") from exc
        self._model.eval()

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        import torch

        inputs = self._processor(
            [np.asarray(clip, dtype=np.float32) for clip in clips], sampling_rate=SAMPLE_RATE, return_tensors="pt"
        )
        features = inputs.input_features.to(self.device, dtype=self._model.dtype)
        kwargs = {"max_new_tokens": self.max_new_tokens} if self.max_new_tokens else {}
        with torch.inference_mode():
            ids = self._model.generate(
                features, language=self.language, task="transcribe", num_beams=1, do_sample=False, **kwargs
            )
        # Raw, as seed-tts-eval's run_wer.py keeps it (a leading space); scoring normalises it.
        return list(self._processor.batch_decode(ids, skip_special_tokens=True))

    def decoding_settings(self) -> dict:
        return {
            **WHISPER_GREEDY_SETTINGS,
            "max_new_tokens": self.max_new_tokens or "generation_config default",
            "dtype": "float32",
        }


def load(model: str, *, lang: str, device: str, max_new_tokens: int | None) -> TransformersWhisperBackend:
    """The ASR registry's loader (omnicli.evaluation.asr): locates the weights, then loads them."""
    from omnicli.evaluation.asr.base import resolve_torch_device
    from omnicli.evaluation.asr.locate import locate_transformers

    path = locate_transformers(model)
    return TransformersWhisperBackend(model=str(path), language=lang, device=resolve_torch_device(device),
                                      max_new_tokens=max_new_tokens)
