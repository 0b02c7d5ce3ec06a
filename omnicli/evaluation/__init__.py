"""Evaluation of generated speech: Seed-TTS-eval compatible WER, speaker similarity and MOS.

`omnicli.evaluation.pipeline.Evaluator` is what `omni eval`, `omni eval-wer`
and `omni bench --eval` run (every metric in one pass, docs/eval.md). WER
alone, from Python:

    from omnicli.evaluation import AsrSpec, load_backend, evaluate, build_wer_summary
    backend = load_backend(AsrSpec.parse("faster-whisper:tiny.en-bundled"), lang="en")
    run = evaluate(manifest.rows, "GEN", backend=backend)
    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=backend.describe())
"""

from omnicli.evaluation.asr import AsrBackend, AsrError, AsrSetupError, AsrSpec, default_spec, load_backend
from omnicli.evaluation.normalize import normalize_text
from omnicli.evaluation.results import EvalStatus, WerResult, write_results
from omnicli.evaluation.transcripts import TranscriptsError, read_transcripts
from omnicli.evaluation.wer import UttScore, aggregate, score_utterance
from omnicli.evaluation.wer_run import EvalRun, build_wer_summary, evaluate

__all__ = [
    "AsrBackend", "AsrError", "AsrSetupError", "AsrSpec", "EvalRun", "EvalStatus", "TranscriptsError", "UttScore",
    "WerResult", "aggregate", "build_wer_summary", "default_spec", "evaluate", "load_backend", "normalize_text",
    "read_transcripts", "score_utterance", "write_results",
]
