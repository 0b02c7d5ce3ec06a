"""Moved to the package `omnicli.synth` (plan, run, sink, summary, entrypoint): these names are
re-exported for importers not yet updated; new code imports from `omnicli.synth.*`."""

from omnicli.driver.record_sink import is_output_fault
from omnicli.synth.plan import (
    LOCK,
    RESULTS,
    SUMMARY,
    OutputBusy,
    OutputLock,
    SynthPlan,
    cut_torn_tail,
    input_digest,
    last_results,
    latest_result_lines,
    plan_run,
    tidy_out_dir,
    utterance_seed,
    wav_matches,
)
from omnicli.synth.run import SynthRun
from omnicli.synth.sink import OutputUnwritable, RowSink, prompt_for
from omnicli.synth.summary import build_synth_summary, write_summary

__all__ = [
    "LOCK", "RESULTS", "SUMMARY", "OutputBusy", "OutputLock", "OutputUnwritable", "RowSink", "SynthPlan", "SynthRun",
    "build_synth_summary", "cut_torn_tail", "input_digest", "is_output_fault", "last_results", "latest_result_lines",
    "plan_run", "prompt_for", "tidy_out_dir", "utterance_seed", "wav_matches", "write_summary",
]
