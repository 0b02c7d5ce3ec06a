"""Speaker similarity (SIM) and MOS scorers for `omni eval`, all offline.

    from omnicli.evaluation.scorers import load_scorers, score_audio, audio_summary
    scorers = load_scorers(("sim", "mos"), sim="dvector", mos="dnsmos")
    run = score_audio(manifest.rows, "GEN", scorers)
"""

from __future__ import annotations

from collections.abc import Sequence

from omnicli.evaluation.scorers.base import SAMPLE_RATE, ScoreItem, Scorer, ScorerError, ScorerSetupError
from omnicli.evaluation.scorers.score_folder import AudioResult, AudioRun, audio_summary, score_audio

DEFAULT_SIM = "dvector"
DEFAULT_MOS = "dnsmos"

__all__ = [
    "AudioResult", "AudioRun", "DEFAULT_MOS", "DEFAULT_SIM", "SAMPLE_RATE", "ScoreItem", "Scorer", "ScorerError",
    "ScorerSetupError", "audio_summary", "check_specs", "load_scorers", "score_audio",
]


def check_specs(
    metrics: Sequence[str], *, sim: str = DEFAULT_SIM, mos: str = DEFAULT_MOS, trust_torchscript: bool = False,
) -> None:
    """Parses the specs and locates any weights without loading them (cheap; ScorerSetupError)."""
    from omnicli.evaluation.scorers.mos import locate_utmos, parse_mos_specs
    from omnicli.evaluation.scorers.sim import DEFAULT_WAVLM, locate_wavlm, parse_sim_spec

    if "sim" in metrics:
        backend, model = parse_sim_spec(sim)
        if backend == "wavlm":
            locate_wavlm(model or DEFAULT_WAVLM)
    if "mos" in metrics:
        for backend, model in parse_mos_specs(mos):
            if backend == "utmos":
                locate_utmos(model, trusted=trust_torchscript)


def load_scorers(
    metrics: Sequence[str], *, sim: str = DEFAULT_SIM, mos: str = DEFAULT_MOS, device: str = "cpu",
    trust_torchscript: bool = False,
) -> list[Scorer]:
    """The scorers for the chosen metrics, each loaded once (ScorerSetupError when weights are absent or untrusted)."""
    from omnicli.evaluation.scorers.mos import load_mos
    from omnicli.evaluation.scorers.sim import load_sim

    check_specs(metrics, sim=sim, mos=mos, trust_torchscript=trust_torchscript)
    scorers: list[Scorer] = []
    if "sim" in metrics:
        scorers.append(load_sim(sim, device))
    if "mos" in metrics:
        scorers.extend(load_mos(mos, device, trust_torchscript=trust_torchscript))
    for scorer in scorers:
        scorer.warm_up()
    return scorers
