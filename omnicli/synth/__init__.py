"""`omni synth` as a library: manifest rows -> engine -> OUT/<utt>.wav + results.jsonl + summary.json.

    from omnicli.synth import SynthArgs, synthesize
    report = synthesize(SynthArgs(manifest, out, resolved))   # report.summary: the SynthSummary

Modules, in the order a row crosses them: `entrypoint` (the run: manifest, lock, plan,
engine or Ray pool, summary), `plan` (OUT's lock, resume plan, tidy-up), `run` (the local
run through the request driver), `sink` (a row's prompt; its record -> wav + results row),
`results` (the results.jsonl and summary.json models), `summary` (summary.json).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omnicli.synth.entrypoint import (
        RayOptions,
        RunPhase,
        SilentObserver,
        StopRequest,
        SynthArgs,
        SynthJob,
        SynthObserver,
        SynthReport,
        synthesize,
    )

__all__ = [
    "RayOptions", "RunPhase", "SilentObserver", "StopRequest", "SynthArgs", "SynthJob", "SynthObserver",
    "SynthReport", "synthesize",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: `omni --help` reads `synth.shard` for its option types, and must not
    # pay for the run's modules (the profile loader, YAML, retention) to do so.
    if name in __all__:
        from omnicli.synth import entrypoint

        return getattr(entrypoint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
