"""The vLLM-Omni families, registered with omnicli.families (run by vLLM-Omni's own pipelines).

Importing this module imports neither vLLM-Omni nor torch: the engine, the
tiny builder and the parity checks are `"module:callable"` strings. Without
vLLM-Omni installed the families are still listed; choosing one is a usage
error naming the install command (`requires` / `install_hint`). What the
engine, the overlay and the request code choose per family is the family's
`OmniFamilySpec` (spec.py), registered under the same name.
"""

from __future__ import annotations

from omnicli.families import Family, register_family
from omnicli.vllm_omni import INSTALL_HINT
from omnicli.vllm_omni.spec import MOSS_TTS_LOCAL, QWEN3_TTS


def _qwen3_specs():
    from omnicli.vllm_omni.checkpoints import qwen3_tts_specs

    return qwen3_tts_specs()


def _moss_specs():
    from omnicli.vllm_omni.checkpoints import moss_tts_local_specs

    return moss_tts_local_specs()


register_family(
    Family(
        name=QWEN3_TTS.name,
        description="Qwen3-TTS 12 Hz (talker + code predictor, then Code2Wav; 24 kHz mono) through vLLM-Omni: "
        "Base clones a reference, CustomVoice speaks named voices, VoiceDesign follows an instruction; needs its "
        "checkpoint on disk",
        engine="vllm-omni",
        checkpoint_specs=_qwen3_specs,
        build_tiny="omnicli.vllm_omni.checkpoints:build_tiny",
        build_tiny_options=("stop_frames",),  # make_talker_stop: a talker that ends by codec EOS
        parity_checks="omnicli.parity.qwen3_tts:run",
        requires=("vllm_omni",),
        install_hint=INSTALL_HINT,
    )
)
register_family(
    Family(
        name=MOSS_TTS_LOCAL.name,
        description="MOSS-TTS-Local-Transformer v1.5 (local transformer talker, then its codec; 48 kHz stereo) "
        "through vLLM-Omni: continuation of a reference with its text, or generation without one; needs its "
        "checkpoint (with remote code) on disk",
        engine="vllm-omni",
        checkpoint_specs=_moss_specs,
        remote_code_option="trust_remote_code",  # its processor is code from the checkpoint folder (moss.py)
        requires=("vllm_omni",),
        install_hint=INSTALL_HINT,
    )
)
