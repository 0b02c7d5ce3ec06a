"""Model families known to the engine."""

from __future__ import annotations

from omnicli.engine.models.base import ModelAdapter

MODELS = {
    "omni-tiny": "the embedded default: random-weight Llama talker + streaming codec, built locally from a seed",
    "orpheus": "Orpheus TTS 3B, finetuned (named voices) or pretrained (continues a reference) (Llama 3.2 talker + SNAC 24 kHz); needs its checkpoints on disk",
    "neutts-air": "NeuTTS Air (Qwen2 0.5B talker + NeuCodec, voice cloning, espeak-ng phonemes); needs its checkpoints on disk",
}

# Families whose codec keeps per-slot ring caches (the `codec_ring_headroom` setting
# applies); the others decode stateless windows (omnicli.engine.windowed).
RING_CACHE_FAMILIES = frozenset({"omni-tiny"})


def load_model(
    name: str,
    *,
    seed: int | None = None,
    codec_dtype: str = "float32",
    model_path: str | None = None,
    codec_path: str | None = None,
    options: dict | None = None,
) -> ModelAdapter:
    if name == "omni-tiny":
        from omnicli.engine.models import omni_tiny

        return omni_tiny.OmniTinyAdapter.load(omni_tiny.DEFAULT_SEED if seed is None else seed, codec_dtype)
    if name == "orpheus":
        from omnicli.engine.models import orpheus

        return orpheus.OrpheusAdapter.load(model_path, codec_path, codec_dtype=codec_dtype, options=options)
    if name == "neutts-air":
        from omnicli.engine.models import neutts

        return neutts.NeuTTSAdapter.load(model_path, codec_path, codec_dtype=codec_dtype, options=options)
    known = ", ".join(sorted(MODELS))
    raise ValueError(f"unknown model {name!r} (known: {known})")


def checkpoint_specs(name: str):
    """The on-disk parts a family needs (empty for the self-building omni-tiny)."""
    if name == "orpheus":
        from omnicli.engine.models import orpheus

        return [orpheus.TALKER, orpheus.CODEC]
    if name == "neutts-air":
        from omnicli.engine.models import neutts

        return [neutts.TALKER, neutts.CODEC]
    return []


def check_checkpoints(name: str, model_path: str | None, codec_path: str | None) -> None:
    """Raises CheckpointMissing naming every place looked when a part is not on disk."""
    from omnicli.engine.models.checkpoints import CheckpointMissing, locate

    problems = []
    for spec in checkpoint_specs(name):
        try:
            locate(spec, model_path if spec.profile_key == "model_path" else codec_path, name)
        except CheckpointMissing as exc:
            problems.append(str(exc))
    if problems:
        raise CheckpointMissing("\n".join(problems))
