"""The reference voice's family, registered with omnicli.families. Importing this imports no hibari."""

from __future__ import annotations

from omnicli.families import Family, register_family
from omnicli.reference_voice import BUNDLED_VOICE, ENGINE_NAME, INSTALL_HINT

register_family(
    Family(
        name="hibari",
        description=f"REFERENCE VOICE, not a codec LM: hibari-tts, a 6 M-parameter int8 ONNX voice (its bundled "
        f"'{BUNDLED_VOICE}', 24 kHz mono, English) on CPU, one chunk per sentence; ignores prompt wavs (it cannot "
        "clone). Real speech for eval, retention and the report on any machine",
        engine=ENGINE_NAME,
        requires=("hibari",),
        install_hint=INSTALL_HINT,
    )
)
