"""funasr Paraformer-zh (non-autoregressive), as seed-tts-eval runs it for Chinese."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from omnicli.evaluation.asr.base import AsrBackend, AsrError, AsrSetupError


def funasr_available() -> bool:
    try:
        import funasr  # noqa: F401
    except Exception:
        return False
    return True


class ParaformerBackend(AsrBackend):
    """`AutoModel(model=<local folder>).generate(input=clips, batch_size_s=300)`,
    hypotheses converted to simplified Chinese with zhconv. Takes whole clips
    (no 30 s window), like the original."""

    backend = "funasr"
    truncates_to_window = False

    def __init__(self, *, model: str, language: str, device: str, max_new_tokens: int | None = None):
        super().__init__(model=model, language=language, device=device, max_new_tokens=max_new_tokens)
        if language != "zh":
            raise AsrSetupError("the funasr Paraformer backend transcribes Chinese only (use --lang zh)")
        try:
            from funasr import AutoModel
        except Exception as exc:
            raise AsrSetupError(f"funasr is not installed or cannot be imported ({exc}); pip install funasr") from exc
        try:
            self._model = AutoModel(model=model, device=device, disable_update=True, disable_pbar=True)
        except Exception as exc:
            raise AsrError(f"funasr could not load {model}: {exc}") from exc

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[str]:
        import zhconv

        results = self._model.generate(input=[np.asarray(c, dtype=np.float32) for c in clips], batch_size_s=300)
        if len(results) != len(clips):
            raise AsrError(f"funasr returned {len(results)} results for {len(clips)} clips")
        return [zhconv.convert(str(r.get("text", "")), "zh-cn") for r in results]  # raw, as run_wer.py keeps it

    def decoding_settings(self) -> dict:
        return {"search": "non-autoregressive (Paraformer)", "batch_size_s": 300, "window_s": None, "zhconv": "zh-cn"}


def load(model: str, *, lang: str, device: str, max_new_tokens: int | None = None) -> ParaformerBackend:
    """The ASR registry's loader (omnicli.evaluation.asr): checks funasr, locates the model, then loads it."""
    from omnicli.evaluation.asr.base import resolve_torch_device
    from omnicli.evaluation.asr.locate import locate_paraformer

    del max_new_tokens  # the registry passes it to every backend; Paraformer takes no cap
    if not funasr_available():
        raise AsrSetupError("the funasr backend needs the funasr package (pip install funasr), which is not installed")
    return ParaformerBackend(model=str(locate_paraformer(model)), language=lang, device=resolve_torch_device(device))
