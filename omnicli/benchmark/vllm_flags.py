"""Every flag of vLLM-Omni 0.32.0rc1's `vllm bench serve --omni`, and what `omni bench` does with it.

vLLM-Omni's own tools (benchmarks/tts/bench_tts.py, its perf CI) build `vllm bench serve --omni ...`
command lines; `omni bench` takes them unchanged. Each flag is one of:

- implemented: an `omni bench` option of the same name and meaning (docs/bench.md says where it differs);
- reported: accepted, with its value, and said once on stderr as not applying (a server, another
  dataset, a client-side detail of HTTP), never "No such option";
- refused: exits 2 with the reason, where taking it silently would measure something else.

The table is the one place the flags are listed: `BenchCommand` strips the reported ones that are not
omni options before click parses, docs/bench.md's flag table follows it, and
tests/test_dropin_flags.py compares it with the parser in the installed vLLM-Omni wheel, so a flag
added upstream fails a test instead of a user's command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["implemented", "reported", "refused"]
Nargs = Literal[0, 1, "*", "+"]


@dataclass(frozen=True)
class VllmFlag:
    status: Status
    why: str  # implemented: omni's meaning; reported / refused: why it does not apply
    nargs: Nargs = 1  # how many values follow it (argparse's nargs; 0 for a switch)


# Reasons, shared by groups of flags (the note groups the flags given by reason).
SERVER = "vLLM server/client option, not applying to the embedded engine"
OTHER_DATASET = "option of a vLLM dataset omni bench does not read (it reads the seed-tts datasets)"
TEXT_LM = "text-LM request option, not applying to a TTS request"
OMNI_OTHER = "vLLM-Omni option of a non-TTS benchmark (video, duplex, OmniInteract, image edits)"
HTTP_ONLY = "vLLM-Omni's HTTP client detail; the embedded engine gets the request in-process"

_IMPLEMENTED: dict[str, tuple[str, Nargs]] = {
    "--seed": ("seed of the prompt shuffle and the arrival times", 1),
    "--num-prompts": ("requests per measured pass", 1),
    "--dataset-name": ("seed-tts, seed-tts-text, seed-tts-design (others exit 2)", 1),
    "--dataset-path": ("a local seed-tts-eval folder (nothing is downloaded)", 1),
    "--disable-shuffle": ("keep the manifest order", 0),
    "--label": ("label of the result files", 1),
    "--max-concurrency": ("closed loop: requests in flight (a list sweeps)", 1),
    "--output-len": ("talker token cap (vLLM-Omni's max_new_tokens)", 1),
    "--hf-output-len": ("same as --output-len", 1),
    "--request-rate": ("open loop arrivals per second", 1),
    "--burstiness": ("gamma shape of the inter-arrival times", 1),
    "--disable-tqdm": ("no progress bar", 0),
    "--num-warmups": ("requests run and discarded before measuring", 1),
    "--save-result": ("one vLLM-shaped result file per run", 0),
    "--save-detailed": ("per-request lists in the result files", 0),
    "--append-result": ("append to an existing result file", 0),
    "--metadata": ("KEY=VALUE pairs as top-level keys of the result file", "*"),
    "--result-dir": ("folder of the result files", 1),
    "--result-filename": ("name of the result file", 1),
    "--percentile-metrics": ("metrics whose statistics are written", 1),
    "--metric-percentiles": ("percentiles written", 1),
    "--goodput": ("SLOs of request_goodput", "+"),
    "--top-p": ("talker sampling", 1),
    "--top-k": ("talker sampling", 1),
    "--temperature": ("talker sampling", 1),
    "--repetition-penalty": ("talker sampling", 1),
    "--ramp-up-strategy": ("ramped arrival rate", 1),
    "--ramp-up-start-rps": ("ramped arrival rate", 1),
    "--ramp-up-end-rps": ("ramped arrival rate", 1),
    "--extra-body": ("request extras (max_new_tokens, voice, sampling, family fields)", 1),
    "--plot-timeline": ("vLLM's timeline plot beside each result file", 0),
    "--timeline-itl-thresholds": ("ITL thresholds of the timeline", 1),
    "--seed-tts-locale": ("en or zh: the folder of --dataset-path", 1),
    "--seed-tts-root": ("the seed-tts-eval folder holding en/ and zh/ (wins over --dataset-path)", 1),
    "--seed-tts-wer-eval": ("same as --eval wer on the kept audio", 0),
}

# vLLM's other datasets' flags, with their arity
_OTHER_DATASET_FLAGS: tuple[tuple[str, Nargs], ...] = (
    ("--custom-output-len", 1), ("--custom-ensure-client-side-data", 0), ("--spec-bench-output-len", 1),
    ("--spec-bench-category", 1), ("--sharegpt-output-len", 1), ("--timed-trace-chunk-hash-size", 1),
    ("--timed-trace-sec-multiplier", 1), ("--timed-trace-label-timestamp", 1),
    ("--timed-trace-label-input-length", 1), ("--timed-trace-label-output-length", 1),
    ("--timed-trace-label-hash-ids", 1), ("--blazedit-min-distance", 1), ("--blazedit-max-distance", 1),
    ("--asr-max-audio-len-sec", 1), ("--asr-min-audio-len-sec", 1), ("--random-input-len", 1),
    ("--random-output-len", 1), ("--random-range-ratio", 1), ("--random-prefix-len", 1),
    ("--random-batch-size", 1), ("--no-reranker", 0), ("--random-mm-base-items-per-request", 1),
    ("--random-mm-num-mm-items-range-ratio", 1), ("--random-mm-limit-mm-per-prompt", 1),
    ("--random-mm-bucket-config", 1), ("--bfcl-categories", 1), ("--prefix-repetition-prefix-len", 1),
    ("--prefix-repetition-suffix-len", 1), ("--prefix-repetition-num-prefixes", 1),
    ("--prefix-repetition-output-len", 1), ("--speed-bench-dataset-subset", 1), ("--speed-bench-output-len", 1),
    ("--speed-bench-category", 1),
)

_REPORTED: dict[str, tuple[str, Nargs]] = {
    "--omni": ("vLLM-Omni's benchmark mode, which omni bench always is", 0),
    # the server vLLM's client talks to
    "--backend": (SERVER, 1), "--base-url": (SERVER, 1), "--host": (SERVER, 1), "--port": (SERVER, 1),
    "--endpoint": (SERVER, 1), "--header": (SERVER, "*"), "--model": (SERVER + " (the model is the profile's)", 1),
    "--tokenizer": (SERVER, 1), "--tokenizer-mode": (SERVER, 1), "--served-model-name": (SERVER, 1),
    "--ready-check-timeout-sec": (SERVER, 1), "--insecure": (SERVER, 0), "--skip-tokenizer-init": (SERVER, 0),
    "--lora-modules": (SERVER, "+"), "--lora-assignment": (SERVER, 1),
    "--trust-remote-code": ("accepted and never honoured: omni never runs code from a model folder", 0),
    "--self-timed": (SERVER, 0), "--no-self-timed": (SERVER, 0),
    "--probe-request-rate": ("vLLM's server probing, not applying to the embedded engine", 1),
    "--plot-dataset-stats": ("vLLM's dataset statistics plot, not drawn by omni bench", 0),
    # text-LM request knobs
    "--input-len": (TEXT_LM, 1), "--use-beam-search": (TEXT_LM, 0), "--logprobs": (TEXT_LM, 1),
    "--min-p": (TEXT_LM, 1), "--frequency-penalty": (TEXT_LM, 1), "--presence-penalty": (TEXT_LM, 1),
    "--chat-template-kwargs": (TEXT_LM, 1), "--skip-chat-template": (TEXT_LM, 0),
    "--enable-multimodal-chat": (TEXT_LM, 0), "--no-oversample": (TEXT_LM, 0),
    "--ignore-eos": ("the talker stops at its end-of-speech code or --max-new-tokens; ignore_eos is not applied", 0),
    # vLLM-Omni's TTS flags that have no in-process meaning
    "--no-stream": ("omni's engine always streams: audio_ttfp is the first chunk's (vLLM-Omni without streaming "
                    "reports the whole response's)", 0),
    "--request-id-prefix": ("requests are named after their utterance ids", 1),
    "--omni-request-timeout-s": ("an in-process request has no HTTP timeout; a stalled engine is the engine's "
                                 "stage_timeout_s", 1),
    "--print-stage": ("per-stage figures (stage_*) are in the result files whenever the engine reports them", 0),
    "--seed-tts-file-ref-audio": (HTTP_ONLY, 0), "--seed-tts-inline-ref-audio": (HTTP_ONLY, 0),
    "--seed-tts-system-prompt": ("Qwen3-Omni chat backend's system message; omni's TTS families take none", 1),
    "--seed-tts-reference-as-input": ("openai-realtime-chat backend only; omni sends the reference as the "
                                      "voice-clone reference", 0),
    "--seed-tts-turns-per-session": ("realtime session grouping; omni sends one request per row", 1),
    "--seed-tts-wer-save-items": ("with --eval wer the per-utterance rows are omni eval's results.jsonl in the "
                                  "audio folder", 0),
    "--hf-name": ("Hugging Face dataset id: omni reads a local copy only (--dataset-path)", 1),
    "--hf-split": ("Hugging Face dataset split: omni reads a local copy only", 1),
    "--hf-subset": ("Hugging Face dataset subset: omni reads a local copy only", 1),
    # vLLM's other datasets
    **{flag: (OTHER_DATASET, nargs) for flag, nargs in _OTHER_DATASET_FLAGS},
}
# vLLM-Omni's non-TTS benchmarks: every flag of these prefixes (the values they take, below)
_OMNI_OTHER_PREFIXES = ("--daily-omni-", "--videomme-", "--omniinteract-", "--duplex-eval-")
_OMNI_OTHER_SWITCHES = {
    "--daily-omni-inline-local-video", "--daily-omni-save-eval-items", "--videomme-use-subtitle",
    "--videomme-inline-local-video", "--videomme-save-eval-items", "--omniinteract-scenario-focus",
    "--omniinteract-require-response", "--omniinteract-evaluate", "--omniinteract-eval-skip-existing",
    "--duplex-eval-evaluate",
}
_OMNI_OTHER_LISTS = {"--omniinteract-subsets", "--omniinteract-scenario-tags", "--duplex-eval-ids"}
_REPORTED["--image-edits-bot-task"] = (OMNI_OTHER, 1)

_REFUSED: dict[str, tuple[str, Nargs]] = {
    # vLLM's `--profile` is a switch (the server's torch profiler); omni's takes a preset name
    "--profile": ("vLLM's --profile starts the server's torch profiler; omni's --profile names a preset "
                  "(--profile NAME)", 0),
}


def lookup(flag: str) -> VllmFlag | None:
    """The table's entry of a long flag (`--header`), None for a flag vLLM-Omni does not have."""
    if flag in _IMPLEMENTED:
        why, nargs = _IMPLEMENTED[flag]
        return VllmFlag("implemented", why, nargs)
    if flag in _REPORTED:
        why, nargs = _REPORTED[flag]
        return VllmFlag("reported", why, nargs)
    if flag in _REFUSED:
        why, nargs = _REFUSED[flag]
        return VllmFlag("refused", why, nargs)
    if flag.startswith(_OMNI_OTHER_PREFIXES):
        arity: Nargs = 0 if flag in _OMNI_OTHER_SWITCHES else "+" if flag in _OMNI_OTHER_LISTS else 1
        return VllmFlag("reported", OMNI_OTHER, arity)
    return None


def reason(flag: str) -> str:
    """What the table says about a flag (for a note), "" for one it does not name."""
    entry = lookup(flag)
    return entry.why if entry is not None else ""


def table() -> dict[str, VllmFlag]:
    """Every flag the table names (the prefixed non-TTS ones are matched by prefix, not listed)."""
    out = {}
    for flag in (*_IMPLEMENTED, *_REPORTED, *_REFUSED):
        entry = lookup(flag)
        if entry is not None:
            out[flag] = entry
    return out


@dataclass
class Stripped:
    """What `strip_reported` took out of a command line: the flags given, grouped by reason."""

    args: list[str]
    given: dict[str, list[str]]  # reason -> flags, in the order first given

    def notes(self) -> list[str]:
        return [f"{', '.join(flags)}: {why} (ignored)" for why, flags in self.given.items()]


def strip_reported(args: Sequence[str], own: Iterable[str]) -> Stripped:
    """`args` without the reported flags that are not omni options (`own`), each with its values
    (`--header a b`, `--header=a`); the rest is left, in order, for click. Everything after `--` is kept."""
    own = set(own)
    out: list[str] = []
    given: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        name, has_value = (arg.split("=", 1)[0], "=" in arg) if arg.startswith("--") else (arg, False)
        entry = lookup(name) if arg.startswith("--") and name not in own else None
        if entry is None or entry.status != "reported":
            out.append(arg)
            i += 1
            continue
        given.setdefault(entry.why, [])
        if name not in given[entry.why]:
            given[entry.why].append(name)
        i += 1
        if has_value or entry.nargs == 0:
            continue
        if entry.nargs == 1:
            i += 1  # its value, whatever it looks like (argparse takes a negative number too)
            continue
        while i < len(args) and not (args[i].startswith("-") and len(args[i]) > 1 and not _number(args[i])):
            i += 1
    return Stripped(out, given)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
