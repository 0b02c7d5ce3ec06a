"""`omni bench` as a drop-in for `vllm bench serve` / `vllm bench serve --omni`: their command-line
flags turned into omni's, and the vLLM-shaped result files and timelines written (docs/bench.md).

Presentation and option mapping only; the figures are `omnicli.benchmark.metrics`', the file
layout `omnicli.benchmark.vllm_format`'s.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from omnicli.benchmark.vllm_flags import strip_reported

_REPORTED_KEY = "omni.vllm_reported"  # ctx.meta: the notes of the vLLM-Omni flags taken out before parsing


class BenchCommand(TyperCommand):
    """`omni bench`'s command: also takes vLLM's `--metadata K=V K=V` and `--goodput K:V K:V`
    (several values after one flag, argparse's nargs), by repeating the flag before each, and every
    other flag of `vllm bench serve --omni` that does not apply here (omnicli.benchmark.vllm_flags):
    taken out with its values before click parses, and reported once by the command."""

    MULTI_VALUE = {"--metadata": "=", "--goodput": ":"}

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        require_profile_value(ctx, args)
        own = {opt for param in self.params for opt in (*param.opts, *param.secondary_opts)}
        stripped = strip_reported(args, own)
        ctx.meta[_REPORTED_KEY] = stripped.notes()
        return super().parse_args(ctx, spread_multi_values(stripped.args, self.MULTI_VALUE))


def reported_flags(ctx: typer.Context) -> list[str]:
    """The notes of the vLLM-Omni flags this invocation gave that do not apply (one line per reason)."""
    return list(ctx.meta.get(_REPORTED_KEY, []))


def require_profile_value(ctx: Any, args: list[str]) -> None:
    """A bare `--profile` (vLLM's switch: the server's torch profiler) followed by another option or
    nothing is a usage error saying so, not a profile named after the next option."""
    for i, arg in enumerate(args):
        if arg == "--":
            return
        if arg in ("--profile", "-p"):
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or (following.startswith("-") and len(following) > 1):
                raise typer.BadParameter(
                    f"{arg} needs a value: a preset name or a YAML file (vLLM's bare --profile, the server's torch "
                    "profiler, does not apply to omni bench)", ctx=ctx)


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


