"""`omni bench` as a drop-in for `vllm bench serve` / `vllm bench serve --omni`: their command-line
flags turned into omni's, and the vLLM-shaped result files and timelines written (docs/bench.md).

Presentation and option mapping only; the figures are `omnicli.benchmark.metrics`', the file
layout `omnicli.benchmark.vllm_format`'s.
"""

from __future__ import annotations

from typer.core import TyperCommand


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


