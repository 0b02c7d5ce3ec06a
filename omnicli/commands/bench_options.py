"""The options of `omni bench`, as Annotated aliases (the command's signature names them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from omnicli.benchmark.options import KEEP_FAILED_ENV
from omnicli.benchmark.outputs import OutputFormat

_VLLM = "vLLM compatibility"
_NOT_APPLYING = "vLLM's server flag: accepted, and ignored (the engine is embedded: no server)."

ProfilesOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--profile",
        "-p",
        help="Preset name (see `omni profiles list`) or path to a YAML file. "
        "Repeat it to A/B several profiles on the same prompts.",
        show_default="default",
    ),
]
ManifestArgOpt = Annotated[Optional[Path], typer.Argument(metavar="MANIFEST", help="Seed-TTS meta.lst "
    "(utt|prompt_text|prompt_wav|text) or JSONL manifest. Default: the shipped demo set, cycled to --num-prompts.",
    show_default=False)]
ManifestOpt = Annotated[Optional[Path], typer.Option("--manifest", "-m", help="Same as the MANIFEST argument.")]
NumPromptsOpt = Annotated[Optional[int], typer.Option("--num-prompts", "-n", min=1, help="Requests per measured "
    "pass; prompts cycle when the manifest has fewer.", show_default="all rows; 32 for the demo set")]
ConcurrencyOpt = Annotated[Optional[str], typer.Option("--concurrency", "--max-concurrency", "-c",
    help="Closed loop: at most N requests in flight. A list (1,8,32,128) runs a sweep, one fresh measured pass per "
    "value.", show_default="1, or no cap with --request-rate")]
RequestRateOpt = Annotated[Optional[float], typer.Option("--request-rate", "-r", help="Open loop: mean arrivals per "
    "second (Poisson at burstiness 1); inf submits all at once.")]
BurstinessOpt = Annotated[float, typer.Option("--burstiness", help="Gamma shape of the inter-arrival times, as "
    "vLLM: 1 Poisson, <1 burstier, >1 steadier.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for prompt shuffling and arrival times.")]
DisableShuffleOpt = Annotated[bool, typer.Option("--disable-shuffle", help="Keep the manifest order.")]
MaxNewTokensOpt = Annotated[Optional[int], typer.Option("--max-new-tokens", min=1, help="Talker token cap per "
    "request.", show_default="profile")]
WarmupOpt = Annotated[int, typer.Option("--warmup", "--num-warmups", min=0, help="Requests run and discarded before "
    "measuring (per engine).")]
WarmupPassOpt = Annotated[bool, typer.Option("--warmup-pass", help="Run a whole discarded pass before measuring.")]
RoundsOpt = Annotated[int, typer.Option("--rounds", min=1, help="Measured passes per load shape, pooled (total "
    "audio s / total duration).")]
MetricPercentilesOpt = Annotated[str, typer.Option("--metric-percentiles", help="Percentiles to report, "
    "comma-separated (vLLM's default is 99; the table also shows p50 and p90).")]
PercentileMetricsOpt = Annotated[Optional[str], typer.Option("--percentile-metrics", help="Metrics whose "
    "mean/median/std/percentiles go into --save-result files, comma-separated, any of: "
    "audio_ttfp, e2el, audio_rtf, audio_duration, audio_underrun, ttft, tpot, itl.", show_default="all")]
CompareOpt = Annotated[Optional[list[str]], typer.Option("--compare", help="A profile to A/B against the --profile "
    "one(s) (repeatable): same prompts, engine restarted.")]
InterleaveOpt = Annotated[bool, typer.Option("--interleave", help="A/B with --rounds R: alternate the profiles' "
    "rounds (A B A B ...), engines kept running side by side, and print each metric's median over rounds, its "
    "spread and the ratio b/a with a bootstrap 90% interval ('no difference measured' when it spans 1.0).")]
SaveResultOpt = Annotated[bool, typer.Option("--save-result", help="Write one vLLM `bench serve`-shaped JSON per "
    "run (load shape x profile), beside the summary file.")]
AppendResultOpt = Annotated[bool, typer.Option("--append-result", help="Append the per-run results to an existing "
    "file (implies --save-result).")]
ResultDirOpt = Annotated[Optional[Path], typer.Option("--result-dir", help="Folder for the result files (the "
    "summary file is written whenever it is given).")]
ResultFilenameOpt = Annotated[Optional[str], typer.Option("--result-filename", help="With --save-result: the per-run "
    "file's name (several runs need --append-result). Without: the summary file's name.",
    show_default="{label}-{rate}qps-concurrency{N}-{model}-{date}.json; summary omni-bench-<time>.json")]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help="Label (file name prefix) of --save-result files.",
    show_default="omni")]
MetadataOpt = Annotated[Optional[list[str]], typer.Option("--metadata", metavar="KEY=VALUE ...",
    help="Recorded as top-level keys of each --save-result file: several pairs after one flag, as vLLM "
    "(--metadata version=0.3 tp=1), or the flag repeated.")]
CsvPathOpt = Annotated[Optional[Path], typer.Option("--csv", metavar="FILE", help="Write the results table as CSV: "
    "one row per run, raw values.")]
OutputFormatOpt = Annotated[OutputFormat, typer.Option("--format", help="Console output: a table, or plain `Key: "
    "value` lines for grep and diff.")]
SaveDetailedOpt = Annotated[bool, typer.Option("--save-detailed", help="Add per-request lists to the result.")]
PlotOpt = Annotated[Optional[Path], typer.Option("--plot", help="Write a PNG plot (sweep curves or latency "
    "histograms).")]
AudioOutOpt = Annotated[Optional[Path], typer.Option("--audio-out", help="Keep measured audio as DIR/<utt>.wav (for "
    "omni eval-wer).")]
EvalMetricsOpt = Annotated[Optional[str], typer.Option("--eval", help="After the passes, score the --audio-out "
    "audio with omni eval (any of wer,sim,mos) and add the figures to the result file.")]
EvalAsrOpt = Annotated[Optional[str], typer.Option("--eval-asr", help="ASR for --eval wer, as omni eval --asr.",
    show_default="openai-whisper:large-v3")]
KeepFailedOpt = Annotated[Optional[Path], typer.Option("--keep-failed", envvar=KEEP_FAILED_ENV,
    help="Retain failed or suspect audio here.")]
AllowOutsidePathsOpt = Annotated[bool, typer.Option("--allow-outside-paths", help="Allow manifest audio paths "
    "outside the manifest's folder.")]
RayOpt = Annotated[bool, typer.Option("--ray", help="Run --engines engines on a Ray cluster at once, each with the "
    "whole load; report each engine and the total (needs the Ray extra: docs/scale-out.md).",
    rich_help_panel="Scale-out")]
RayAddressOpt = Annotated[Optional[str], typer.Option("--ray-address", metavar="auto|HOST:PORT",
    help="Join this Ray cluster.", show_default="start a local one", rich_help_panel="Scale-out")]
EnginesOpt = Annotated[Optional[int], typer.Option("--engines", min=1, help="With --ray: engines, one per Ray actor.",
    show_default="1", rich_help_panel="Scale-out")]
GpusPerEngineOpt = Annotated[Optional[float], typer.Option("--gpus-per-engine", min=0, help="With --ray: GPUs each "
    "engine's actor reserves.", show_default="0", rich_help_panel="Scale-out")]
CpusPerEngineOpt = Annotated[Optional[float], typer.Option("--cpus-per-engine", min=0, help="With --ray: CPUs each "
    "engine's actor reserves.", show_default="1", rich_help_panel="Scale-out")]
DatasetNameOpt = Annotated[Optional[str], typer.Option("--dataset-name", help="vLLM-Omni's dataset: seed-tts (needs "
    "--dataset-path).", rich_help_panel=_VLLM)]
DatasetPathOpt = Annotated[Optional[Path], typer.Option("--dataset-path", help="A local seed-tts-eval folder: reads "
    "DIR/<--seed-tts-locale>/meta.lst (or a meta.lst itself).", rich_help_panel=_VLLM)]
SeedTtsLocaleOpt = Annotated[str, typer.Option("--seed-tts-locale", help="en or zh: the folder of --dataset-path.",
    rich_help_panel=_VLLM)]
ExtraBodyOpt = Annotated[Optional[str], typer.Option("--extra-body", metavar="JSON", help="vLLM's request extras: "
    "max_new_tokens/max_tokens, voice, seed, temperature, top_p, top_k, repetition_penalty, and any request field of "
    "the family (instruct, language, task_type).", rich_help_panel=_VLLM)]
TemperatureOpt = Annotated[Optional[float], typer.Option("--temperature", help="Talker sampling (as --set "
    "talker.temperature=).", rich_help_panel=_VLLM)]
TopPOpt = Annotated[Optional[float], typer.Option("--top-p", help="Talker sampling (as --set talker.top_p=).",
    rich_help_panel=_VLLM)]
TopKOpt = Annotated[Optional[int], typer.Option("--top-k", help="Talker sampling (as --set talker.top_k=).",
    rich_help_panel=_VLLM)]
RepetitionPenaltyOpt = Annotated[Optional[float], typer.Option("--repetition-penalty", help="Talker sampling (as "
    "--set talker.repetition_penalty=).", rich_help_panel=_VLLM)]
OutputLenOpt = Annotated[Optional[int], typer.Option("--output-len", "--hf-output-len", min=1,
    help="Same as --max-new-tokens (vLLM-Omni's per-request max_new_tokens).", rich_help_panel=_VLLM)]
GoodputOpt = Annotated[Optional[list[str]], typer.Option("--goodput", metavar="KEY:VALUE ...",
    help="SLOs for request_goodput: ttft, tpot, e2el, audio_ttfp (ms) and audio_rtf (ratio); several pairs after one "
    "flag, as vLLM.", rich_help_panel=_VLLM)]
RampUpStrategyOpt = Annotated[Optional[str], typer.Option("--ramp-up-strategy", metavar="linear|exponential",
    help="Ramp the arrival rate from --ramp-up-start-rps to --ramp-up-end-rps over the pass, as vLLM.",
    rich_help_panel=_VLLM)]
RampUpStartRpsOpt = Annotated[Optional[float], typer.Option("--ramp-up-start-rps", help="With --ramp-up-strategy: "
    "the first request's rate.", rich_help_panel=_VLLM)]
RampUpEndRpsOpt = Annotated[Optional[float], typer.Option("--ramp-up-end-rps", help="With --ramp-up-strategy: the "
    "last request's rate.", rich_help_panel=_VLLM)]
PlotTimelineOpt = Annotated[bool, typer.Option("--plot-timeline", help="Write each run's request timeline beside its "
    "result file (FILE.timeline.html, vLLM's plot; needs plotly).", rich_help_panel=_VLLM)]
TimelineItlThresholdsOpt = Annotated[str, typer.Option("--timeline-itl-thresholds", help="Two ITL thresholds in ms "
    "colouring the timeline.", rich_help_panel=_VLLM)]
DisableTqdmOpt = Annotated[bool, typer.Option("--disable-tqdm", help="No progress bar.", rich_help_panel=_VLLM)]
SeedTtsWerEvalOpt = Annotated[bool, typer.Option("--seed-tts-wer-eval", help="Same as --eval wer (with --audio-out, "
    "default RESULT_DIR/seed_tts_audio).", rich_help_panel=_VLLM)]
SeedTtsRootOpt = Annotated[Optional[Path], typer.Option("--seed-tts-root", help="vLLM-Omni's seed-tts-eval folder "
    "holding en/ and zh/: read instead of --dataset-path's.", rich_help_panel=_VLLM)]
BackendOpt = Annotated[Optional[str], typer.Option("--backend", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
EndpointOpt = Annotated[Optional[str], typer.Option("--endpoint", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
HostOpt = Annotated[Optional[str], typer.Option("--host", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
PortOpt = Annotated[Optional[str], typer.Option("--port", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
BaseUrlOpt = Annotated[Optional[str], typer.Option("--base-url", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help=_NOT_APPLYING + " The model is the profile's.",
    rich_help_panel=_VLLM)]
TokenizerOpt = Annotated[Optional[str], typer.Option("--tokenizer", help=_NOT_APPLYING, rich_help_panel=_VLLM)]
ServedModelNameOpt = Annotated[Optional[str], typer.Option("--served-model-name", help=_NOT_APPLYING,
    rich_help_panel=_VLLM)]
ReadyCheckTimeoutSecOpt = Annotated[Optional[str], typer.Option("--ready-check-timeout-sec", help=_NOT_APPLYING,
    rich_help_panel=_VLLM)]
TrustRemoteCodeOpt = Annotated[bool, typer.Option("--trust-remote-code", help="vLLM's flag: accepted and never "
    "honoured (omni never runs code from a model folder).", rich_help_panel=_VLLM)]
