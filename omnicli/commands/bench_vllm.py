"""`omni bench` as a drop-in for `vllm bench serve` / `vllm bench serve --omni`: their command-line
flags turned into omni's (docs/bench.md).

Option mapping only; the vLLM-shaped result files and timelines are written by
`omnicli.benchmark.outputs.vllm`, their layout is `omnicli.benchmark.vllm_format`'s.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from omnicli.commands.common import note
from omnicli.engine.request import TTSRequest


class BenchCommand(TyperCommand):
    """`omni bench`'s command: also takes vLLM's `--metadata K=V K=V` and `--goodput K:V K:V`
    (several values after one flag, argparse's nargs), by repeating the flag before each."""

    MULTI_VALUE = {"--metadata": "=", "--goodput": ":"}

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_multi_values(args, self.MULTI_VALUE))


def spread_multi_values(args: list[str], flags: dict[str, str]) -> list[str]:
    """`[--metadata, a=1, b=2]` -> `[--metadata, a=1, --metadata, b=2]`: after the flag's value, each
    following word holding the flag's separator (and not starting with '-') is one more value."""
    out: list[str] = []
    flag = None  # the multi-value flag whose values are being read
    expect_value = False
    for arg in args:
        if expect_value:
            out.append(arg)
            expect_value = False
            continue
        name = arg.split("=", 1)[0] if arg.startswith("--") else None
        if name in flags:
            flag, expect_value = name, "=" not in arg
            out.append(arg)
        elif flag is not None and not arg.startswith("-") and flags[flag] in arg:
            out += [flag, arg]
        else:
            flag = None
            out.append(arg)
    return out


def itl_thresholds(text: str) -> list[float]:
    """vLLM's `--timeline-itl-thresholds 25,50` (ms) -> [0.025, 0.05] s."""
    try:
        values = [float(t) / 1000.0 for t in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not two numbers (ms), e.g. 25,50") from None
    if len(values) != 2:
        raise ValueError(f"{text!r}: give two thresholds (ms), e.g. 25,50")
    return values


@dataclass
class Compat:
    """vLLM-Omni's flags turned into omni's."""

    manifest: Path | None
    max_new_tokens: int | None
    sets: list[str]
    request_fields: dict[str, Any]  # TTSRequest fields each request gets unless its row sets them


def vllm_compat(
    dataset_name: str | None, dataset_path: Path | None, locale: str, manifest: Path | None, extra_body: str | None,
    output_len: int | None, max_new_tokens: int | None, *, sampling: dict[str, Any], ignored: dict[str, Any],
) -> Compat:
    """vLLM-Omni's dataset, request and sampling flags as omni's manifest, caps and --set
    overrides (usage errors exit 2); server flags are reported once as not applying."""
    given = [flag for flag, value in ignored.items() if value is not None]
    if given:
        note(f"{', '.join(given)}: vLLM server option(s), not applying to the embedded engine (ignored)")
    if dataset_name is not None and dataset_name != "seed-tts":
        raise typer.BadParameter(f"{dataset_name!r}: omni bench reads the seed-tts dataset (a meta.lst)", param_hint="--dataset-name")
    if locale not in ("en", "zh"):
        raise typer.BadParameter(f"{locale!r}: choose en or zh", param_hint="--seed-tts-locale")
    if dataset_path is not None:
        if manifest is not None:
            raise typer.BadParameter("give the manifest either as MANIFEST/--manifest or with --dataset-path, not both", param_hint="--dataset-path")
        if not dataset_path.exists():
            raise typer.BadParameter(f"{dataset_path}: no such local folder (omni reads a local copy of the seed-tts-eval "
                                     "set: DIR/en/meta.lst, DIR/zh/meta.lst; it downloads nothing)", param_hint="--dataset-path")
        manifest = dataset_path / locale / "meta.lst" if dataset_path.is_dir() else dataset_path
    elif dataset_name is not None:
        raise typer.BadParameter("--dataset-name seed-tts needs --dataset-path DIR (a local seed-tts-eval folder)", param_hint="--dataset-path")
    body: dict[str, Any] = {}
    if extra_body is not None:
        try:
            body = json.loads(extra_body)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from None
        if not isinstance(body, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
    caps = {v for v in (output_len, max_new_tokens, body.pop("max_new_tokens", None), body.pop("max_tokens", None)) if v is not None}
    if len(caps) > 1:
        raise typer.BadParameter(f"different token caps given ({', '.join(map(str, sorted(caps)))})", param_hint="--max-new-tokens")
    cap = caps.pop() if caps else None
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise typer.BadParameter(f"max_new_tokens must be a positive integer (got {cap!r})", param_hint="--extra-body")
    for key in ("temperature", "top_p", "top_k", "repetition_penalty"):  # vLLM merges sampling flags into the body
        if sampling.get(key) is None and key in body:
            sampling[key] = body.pop(key)
        body.pop(key, None)
    sets = [f"talker.{key}={value}" for key, value in sampling.items() if value is not None]
    request_keys = {f.name for f in dataclasses.fields(TTSRequest)} - {"request_id", "text", "ref_audio", "ref_sample_rate", "max_new_tokens"}
    fields = {k: v for k, v in body.items() if k in request_keys}
    unused = [k for k in body if k not in request_keys]
    if unused:
        note(f"--extra-body: {', '.join(unused)} not used by omni's requests (ignored)")
    return Compat(manifest, cap, sets, fields)


class RequestDefaults:
    """An engine whose requests get default field values (a row's own value wins)."""

    def __init__(self, engine: Any, fields: dict[str, Any]):
        self._engine = engine
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def generate(self, request):
        unset = {k: v for k, v in self._fields.items() if getattr(request, k, None) in (None, "")}
        return self._engine.generate(dataclasses.replace(request, **unset))


def timeline_missing() -> str | None:
    """Why --plot-timeline cannot draw (checked before any engine starts), or None."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        return "--plot-timeline draws with vLLM's plot, which needs plotly: pip install plotly"
    return None
