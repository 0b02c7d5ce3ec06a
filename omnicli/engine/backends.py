"""Which engine runs a profile: the family registry names it, this module starts it.

    engine = await start_engine(resolved)    # an EngineLike, whatever the backend

Each backend is a `"module:callable"` (an async `start(resolved)`), imported
only when a profile asks for it: the native engine pulls in vLLM, the
vLLM-Omni one `vllm_omni`. Synth, bench, eval and the Ray actors call
`start_engine` and never name a backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omnicli.lazy import load_ref

if TYPE_CHECKING:
    from omnicli.engine.request import EngineLike
    from omnicli.profile import ResolvedProfile

ENGINES: dict[str, str] = {
    "native": "omnicli.engine.engine:Engine.start",
    "vllm-omni": "omnicli.vllm_omni.engine:OmniEngine.start",
    "onnx-reference": "omnicli.reference_voice.engine:ReferenceEngine.start",  # hibari-tts: a reference voice
}


async def start_engine(resolved: ResolvedProfile) -> EngineLike:
    """Starts the engine of the profile's family; FamilyUnavailable (usage) when its packages are missing."""
    from omnicli.families import check_available

    family = check_available(resolved.profile.model)
    if family.engine not in ENGINES:
        raise ValueError(f"model family {family.name!r} names engine {family.engine!r} (known: {', '.join(ENGINES)})")
    start = load_ref(ENGINES[family.engine])
    return await start(resolved)
