"""The reference voice: hibari-tts, a small non-autoregressive ONNX voice, behind the engine contract.

It is not a talker -> codec family: it has no tokens, no codec and cannot clone a prompt. It gives
`omni synth`, `bench`, `eval` and `report` intelligible speech on any machine, in seconds, so the
toolkit around the engine (WER, retention, report) can be seen working on real speech.

Nothing here imports hibari at import time: the family registers by name (families.py), the engine
(engine.py) imports hibari when it starts. Optional: `pip install 'omnicli[reference-voice]'`.
"""

HIBARI_VERSION = "0.2.1"  # pinned exactly: its bundled voice and G2P are what the measured figures describe
INSTALL_HINT = f"pip install 'omnicli[reference-voice]' (hibari-tts=={HIBARI_VERSION}; scripts/setup.sh installs it)"
ENGINE_NAME = "onnx-reference"
BUNDLED_VOICE = "heart"  # the only voice in the wheel; every other hibari voice is a download: never asked for
KIND = "reference voice (hibari-tts, non-autoregressive ONNX on CPU), not a codec LM"
