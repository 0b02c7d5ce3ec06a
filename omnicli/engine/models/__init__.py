"""Model families known to the engine."""

from __future__ import annotations

from omnicli.engine.models.base import ModelAdapter

MODELS = {
    "omni-tiny": "the embedded default: random-weight Llama talker + streaming codec, built locally from a seed",
}


def load_model(name: str, *, seed: int | None = None, codec_dtype: str = "float32") -> ModelAdapter:
    if name == "omni-tiny":
        from omnicli.engine.models import omni_tiny

        return omni_tiny.OmniTinyAdapter.load(omni_tiny.DEFAULT_SEED if seed is None else seed, codec_dtype)
    known = ", ".join(sorted(MODELS))
    raise ValueError(f"unknown model {name!r} (known: {known})")
