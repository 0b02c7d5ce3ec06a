"""`omni synth` as a library: manifest rows -> engine -> OUT/<utt>.wav + results.jsonl + summary.json.

    from omnicli.synth import SynthArgs, synthesize
    report = synthesize(SynthArgs(manifest, out, resolved))   # report.summary: the SynthSummary

Modules, in the order a row crosses them: `entrypoint` (the run: manifest, lock, plan,
engine or Ray pool, summary), `plan` (OUT's lock, resume plan, tidy-up), `run` (the local
run through the request driver), `sink` (a row's prompt; its record -> wav + results row),
`results` (the results.jsonl and summary.json models), `summary` (summary.json).
"""

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
