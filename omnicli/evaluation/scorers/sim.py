"""Speaker similarity (SIM): cosine between speaker embeddings of the
generated audio and of the row's reference audio.

Backends (`--sim BACKEND[:MODEL]`), all offline:

    dvector   GE2E d-vector bundled in the `resemblyzer` wheel (default)
    wavlm[:microsoft/wavlm-base-plus-sv | /path/folder]
              a transformers WavLMForXVector checkpoint from a folder or the local HF cache

Neither is the WavLM-large + ECAPA-TDNN model behind published Seed-TTS SIM,
so the numbers are on a different scale (docs/eval.md); `sim_backend` in
every output says which one produced them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from omnicli.audio import AudioError, load_mono
from omnicli.evaluation.asr.locate import force_offline, looks_like_path
from omnicli.evaluation.clips import MAX_CLIP_SECONDS
from omnicli.evaluation.scorers.base import SAMPLE_RATE, ScoreItem, Scorer, ScorerError, ScorerSetupError, cosine

DEFAULT_WAVLM = "microsoft/wavlm-base-plus-sv"
SIM_BACKENDS = ("dvector", "wavlm")
_ALIASES = {"dvector": "dvector", "d-vector": "dvector", "resemblyzer": "dvector", "wavlm": "wavlm"}

COMPARABILITY = {
    "dvector": "GE2E d-vector (resemblyzer); NOT comparable to published Seed-TTS SIM (WavLM-large + ECAPA-TDNN): "
    "a different model and scale, compare only with other runs of this backend",
    "wavlm": "WavLM x-vector (transformers WavLMForXVector); closer to, but NOT the same model as, published "
    "Seed-TTS SIM (WavLM-large + ECAPA-TDNN): compare only with other runs of the same checkpoint",
}


class SpeakerEncoder:
    """Maps 16 kHz clips to speaker embeddings (one row per clip)."""

    name = ""
    model = ""

    def embed(self, clips: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def warm_up(self, clip: np.ndarray) -> None:
        self.embed([clip])


class DVectorEncoder(SpeakerEncoder):
    name = "dvector"

    def __init__(self, device: str = "cpu"):
        try:
            import resemblyzer
        except ImportError as exc:
            raise ScorerSetupError(
                f"the dvector SIM backend needs the resemblyzer package ({exc}); install omnicli's eval extra "
                "(scripts/setup.sh does) or pip install resemblyzer"
            ) from None
        self._preprocess = resemblyzer.preprocess_wav
        try:
            self._encoder = resemblyzer.VoiceEncoder(device, verbose=False)
        except Exception as exc:  # a damaged wheel, a torch that cannot read the weights
            raise ScorerError(f"cannot load resemblyzer's bundled d-vector model: {exc}") from None
        self.model = "resemblyzer-" + _version("resemblyzer") + ":pretrained.pt (GE2E, bundled)"

    def embed(self, clips: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = []
        for clip in clips:
            # Volume normalisation and VAD trimming of long pauses, as the model was trained.
            wav = self._preprocess(np.asarray(clip, dtype=np.float32))
            if wav.shape[0] < SAMPLE_RATE // 10:
                raise ScorerError("no voiced audio left after voice-activity trimming")
            out.append(self._encoder.embed_utterance(wav))
        return out

    def warm_up(self, clip: np.ndarray) -> None:
        self._encoder.embed_utterance(clip)  # past the voice-activity trim, which a synthetic clip may not survive


class WavLMEncoder(SpeakerEncoder):
    name = "wavlm"

    def __init__(self, path: Path, device: str = "cpu"):
        force_offline()
        import torch
        from transformers import AutoFeatureExtractor, WavLMForXVector

        _refuse_remote_code(path)
        try:
            # trust_remote_code=False: transformers never runs the folder's code nor asks on stdin.
            self._extractor = AutoFeatureExtractor.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False)
            self._model = WavLMForXVector.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False).to(device).eval()  # type: ignore[arg-type]
        except Exception as exc:
            raise ScorerError(f"cannot load a WavLMForXVector checkpoint from {path}: {exc}") from None
        self._torch = torch
        self.device = device
        self.model = str(path)

    def embed(self, clips: Sequence[np.ndarray]) -> list[np.ndarray]:
        inputs = self._extractor(
            [np.asarray(c, dtype=np.float32) for c in clips], sampling_rate=SAMPLE_RATE,
            return_tensors="pt", padding=True, return_attention_mask=True,
        )
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with self._torch.inference_mode():
            embeddings = self._model(**inputs).embeddings
        return [e for e in embeddings.float().cpu().numpy()]


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def locate_wavlm(model: str, cache_dir: str | Path | None = None) -> Path:
    """A local folder (config.json inside) or a repo id found in the HF cache; never downloads."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ScorerSetupError(f"{path} is not a transformers model folder (no config.json inside)")
        _refuse_remote_code(path)
        return path
    if looks_like_path(model):
        raise ScorerSetupError(f"WavLM speaker-verification folder {path} not found (no such folder on this machine)")
    force_offline()
    from huggingface_hub import constants, snapshot_download

    cache = str(cache_dir) if cache_dir is not None else str(constants.HF_HUB_CACHE)
    try:
        snapshot = Path(snapshot_download(model, local_files_only=True, cache_dir=cache))
    except Exception:
        raise ScorerSetupError(
            f"WavLM speaker-verification model {model!r} is not on this machine: looked in the Hugging Face cache "
            f"{cache} (offline, nothing is downloaded). Copy the model there from a connected machine "
            f"(huggingface-cli download {model}), set HF_HUB_CACHE, or pass a local folder with config.json, "
            "preprocessor_config.json and the weights (--sim wavlm:/path/to/folder)"
        ) from None
    _refuse_remote_code(snapshot)
    return snapshot


def _refuse_remote_code(folder: Path) -> None:
    from omnicli.model_files import ModelFileError, refuse_remote_code

    try:
        refuse_remote_code(folder)
    except ModelFileError as exc:
        raise ScorerSetupError(str(exc)) from None


class SimScorer(Scorer):
    metric = "sim"
    keys = ("sim",)
    needs_reference = True

    def __init__(self, encoder: SpeakerEncoder):
        self.encoder = encoder
        self.backend = encoder.name
        # References repeat across rows (one prompt voice, many texts): embed each once.
        self._refs: dict[Path, np.ndarray | Exception] = {}
        self._lock = threading.Lock()

    def reference_embedding(self, path: Path | None) -> np.ndarray:
        if path is None:
            raise ScorerError("the manifest row names no reference audio (prompt_wav)")
        key = Path(path).expanduser().resolve()
        with self._lock:
            cached = self._refs.get(key)
        if cached is None:
            try:
                clip = load_mono(key, SAMPLE_RATE, max_seconds=MAX_CLIP_SECONDS)
                if clip.shape[0] == 0:
                    raise ScorerError(f"reference audio {key} holds no samples")
                cached = self.encoder.embed([clip])[0]
            except (AudioError, ScorerError) as exc:
                cached = ScorerError(f"reference audio {key}: {exc}")
            with self._lock:
                self._refs[key] = cached
        if isinstance(cached, Exception):
            raise cached
        return cached

    def score(self, items: Sequence[ScoreItem]) -> list[dict[str, float]]:
        refs = [self.reference_embedding(item.reference) for item in items]
        gens = self.encoder.embed([item.clip for item in items])
        return [{"sim": round(cosine(g, r), 4)} for g, r in zip(gens, refs, strict=True)]

    def _warm_up(self, clip: np.ndarray) -> None:
        self.encoder.warm_up(clip)

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.encoder.model,
            "comparable_to": COMPARABILITY[self.backend],
        }


def parse_sim_spec(text: str) -> tuple[str, str | None]:
    """`BACKEND` or `BACKEND:MODEL` (only the first ':' splits)."""
    backend, sep, model = text.strip().partition(":")
    name = _ALIASES.get(backend.strip().lower())
    if name is None:
        raise ScorerSetupError(
            f"unknown SIM backend {backend!r} in --sim {text!r} (expected one of {', '.join(SIM_BACKENDS)})")
    model = model.strip()
    if sep and not model:
        raise ScorerSetupError(f"--sim {text!r} names no model after ':'")
    if name == "dvector" and model:
        raise ScorerSetupError("the dvector backend uses the model bundled in resemblyzer; it takes no MODEL")
    return name, (model or (DEFAULT_WAVLM if name == "wavlm" else None))


def load_sim(spec: str, device: str = "cpu") -> SimScorer:
    """Locates the weights (ScorerSetupError when absent) and loads the encoder once."""
    backend, model = parse_sim_spec(spec)
    if backend == "dvector":
        return SimScorer(DVectorEncoder(device))
    return SimScorer(WavLMEncoder(locate_wavlm(model or DEFAULT_WAVLM), device))
