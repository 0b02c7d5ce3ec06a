"""The vLLM-Omni backend: Qwen3-TTS and MOSS-TTS-Local run by vLLM-Omni's own pipelines, in-process.

Nothing here imports vllm_omni at import time: the families register by name
(families.py) and the engine (engine.py) imports vLLM-Omni when it starts.
"""
