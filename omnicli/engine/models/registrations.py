"""The native engine's model families, registered with omnicli.families.

Importing this module imports no model code: loaders, builders and parity
checks are `"module:callable"` strings, checkpoint specs are read on call.
"""

from __future__ import annotations

from omnicli.checkpoints import CheckpointSpec
from omnicli.families import Family, register_family


def _orpheus_specs() -> list[CheckpointSpec]:
    from omnicli.engine.models import orpheus

    return [orpheus.TALKER, orpheus.CODEC]


def _neutts_specs() -> list[CheckpointSpec]:
    from omnicli.engine.models import neutts

    return [neutts.TALKER, neutts.CODEC]


def _phonemizer_status() -> tuple[bool, str]:
    from omnicli.engine.models import phonemes

    return phonemes.status()


register_family(Family(
    name="omni-tiny",
    description="the embedded default: random-weight Llama talker + streaming codec, built locally from a seed",
    engine="native",
    load_adapter="omnicli.engine.models.omni_tiny:load_adapter",
    ring_cache=True,
))
register_family(
    Family(
        name="orpheus",
        description="Orpheus TTS 3B, finetuned (named voices) or pretrained (continues a reference) (Llama 3.2 "
                    "talker + SNAC 24 kHz); "
        "needs its checkpoints on disk",
        engine="native",
        checkpoint_specs=_orpheus_specs,
        load_adapter="omnicli.engine.models.orpheus:load_adapter",
        build_tiny="omnicli.engine.models.orpheus:build_tiny",
        parity_checks="omnicli.parity.orpheus:run",
    )
)
register_family(
    Family(
        name="neutts-air",
        description="NeuTTS Air (Qwen2 0.5B talker + NeuCodec, voice cloning, espeak-ng phonemes); needs its "
                    "checkpoints on disk",
        engine="native",
        checkpoint_specs=_neutts_specs,
        load_adapter="omnicli.engine.models.neutts:load_adapter",
        build_tiny="omnicli.engine.models.neutts:build_tiny",
        parity_checks="omnicli.parity.neutts:run",
        extra_status=_phonemizer_status,
        extra_label="espeak-ng + phonemizer",  # its text frontend is an optional (GPL-3.0) install
    )
)
