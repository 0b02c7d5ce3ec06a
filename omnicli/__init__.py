"""omnicli: offline TTS batch synthesis, load benchmarking and evaluation.

The library is usable from Python; the `omni` command is a thin layer on top
(see `omnicli.commands`).
"""

__version__ = "0.1.0"
