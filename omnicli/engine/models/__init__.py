"""Model adapters of the native engine; which family is which lives in omnicli.families."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omnicli.engine.models.base import ModelAdapter


def load_model(
    name: str,
    *,
    seed: int | None = None,
    codec_dtype: str = "float32",
    model_path: str | None = None,
    codec_path: str | None = None,
    options: dict[str, Any] | None = None,
) -> ModelAdapter:
    """The adapter of a registered native family (UnknownFamily for any other name)."""
    from omnicli.families import get_family
    from omnicli.lazy import load_ref

    family = get_family(name)
    if family.load_adapter is None:
        raise ValueError(f"model family {name!r} runs on the {family.engine!r} engine, which loads it itself")
    loader = load_ref(family.load_adapter)
    return loader(seed=seed, codec_dtype=codec_dtype, model_path=model_path, codec_path=codec_path, options=options)
