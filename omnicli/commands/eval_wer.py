"""`omni eval-wer`: Seed-TTS-eval compatible WER of generated speech.

An alias of `omni eval --metrics wer` (commands/eval.py) that keeps its own
options and file names: wer_results.tsv / .jsonl, wer_summary.json and
seed-tts-eval's wav_res_ref_text.wer, under GEN_DIR/eval_wer by default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from omnicli.commands.common import ProfileOption, QuietOption, SetOption, VerboseOption
from omnicli.commands.eval import Device, Lang, run
from omnicli.commands.report import ReportOption
from omnicli.runtime.console import set_verbosity


def eval_wer(
    gen_dir: Annotated[Path, typer.Argument(help="Folder holding the generated <utt>.wav files.", show_default=False)],
    manifest: Annotated[Path, typer.Option(
        "--manifest", "-m", help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav], or seed-tts-eval's "
        "utt|text and utt|text|prompt_wav) or JSONL.")],
    lang: Annotated[Lang, typer.Option("--lang", "-l", help="Language of the texts: en (WER) or zh (CER).")] = Lang.en,
    asr: Annotated[Optional[str], typer.Option(
        "--asr", help="BACKEND[:MODEL]: openai-whisper[:large-v3|/path.pt], faster-whisper[:NAME|/ct2-dir|"
        "tiny.en-bundled], transformers[:REPO_ID|/dir], funasr[:paraformer-zh|/dir]. Local models only.",
        show_default="openai-whisper:large-v3; zh: funasr:paraformer-zh (Whisper only when chosen here)")] = None,
    threshold: Annotated[Optional[float], typer.Option(
        "--threshold", min=0.0, help="Retain audio whose WER exceeds this (fraction).",
        show_default="profile retention.asr_wer_threshold, 0.5")] = None,
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="Folder for wer_results.tsv/.jsonl and wer_summary.json.",
        show_default="GEN_DIR/eval_wer")] = None,
    transcripts: Annotated[Optional[Path], typer.Option(
        "--transcripts",
        help="Re-score cached transcripts (JSONL {utt,hyp} or TSV utt<TAB>hyp) without running ASR.")] = None,
    keep_failed: Annotated[Optional[Path], typer.Option(
        "--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR",
        help="Retain the ASR input of asr_mismatch/asr_empty utterances here.", show_default="off")] = None,
    device: Annotated[Optional[Device], typer.Option(
        "--device", help="Where ASR runs.", show_default="profile device (auto)")] = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="Clips per ASR batch (where the backend batches).")] = 8,
    max_new_tokens: Annotated[Optional[int], typer.Option(
        "--max-new-tokens", min=1, help="Cap on decoded tokens per clip.",
        show_default="backend default (224 for openai-whisper)")] = None,
    profile: ProfileOption = None,
    sets: SetOption = None,
    report_file: ReportOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Transcribe GEN_DIR/<utt>.wav for every manifest row and report Seed-TTS-eval WER.

    Exit codes: 0 every utterance scored, 1 some missing or failed, 2 bad usage
    or input (including an ASR model that is not on this machine), 3 the ASR
    model failed to load, 130 interrupted.
    """
    from omnicli.evaluation.eval_report import WER_FILES
    from omnicli.evaluation.pipeline import EvalArgs

    set_verbosity(quiet, verbose)
    args = EvalArgs(
        gen_dir, manifest, ("wer",), WER_FILES, None, out=out, lang=lang.value, asr=asr, threshold=threshold,
        transcripts=transcripts, keep_failed=keep_failed, device=device.value if device else None,
        batch_size=batch_size, max_new_tokens=max_new_tokens,
    )
    raise typer.Exit(run(args, profile=profile, sets=sets, report_file=report_file))
