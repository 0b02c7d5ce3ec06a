"""The `omni` command: a Typer app that only wires the subcommands together."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from omnicli.commands import (
    bench,
    bench_export,
    bench_vllm,
    datasets,
    env,
    eval_wer,
    json_schema,
    models,
    profiles,
    report,
    synth,
    synth_merge,
)
from omnicli.commands import eval as eval_cmd
from omnicli.errors import OmniError
from omnicli.runtime.quiet import quiet_vllm

if TYPE_CHECKING:
    from typer import _click  # the click Typer vendors: what its groups are invoked with

# Start-up of the `omni` command. Here, not in main(): vLLM's engine-core
# process (spawned) re-imports the command's main module, not main().
quiet_vllm()

# `-h` works wherever `--help` does (subcommands inherit the context settings).
CONTEXT = {"help_option_names": ["-h", "--help"]}


class OmniGroup(TyperGroup):
    """Typer's group, with plain usage errors when stderr is not a terminal,
    and the one place an OmniError becomes its message and exit code.

    Typer draws usage errors in a Rich panel sized to the terminal, which cuts
    an option name or a path in two when the output goes to a log or a pipe;
    there click's plain one-line `Error: ...` is printed instead.
    """

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OmniError as exc:  # usage 2, engine 3, output 4 (omnicli.errors)
            from omnicli.commands.common import print_error

            print_error(exc)
            raise typer.Exit(exc.exit_code) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if _is_terminal(sys.stderr):
            return super().main(*args, **kwargs)
        # every command's own help too (`omni bench --help | less`): each keeps its own markup mode
        commands = [self, *_subcommands(self)]
        modes = [command.rich_markup_mode for command in commands]
        for command in commands:
            command.rich_markup_mode = None
        try:
            return super().main(*args, **kwargs)
        finally:
            for command, mode in zip(commands, modes):
                command.rich_markup_mode = mode


def _subcommands(group: Any) -> list[Any]:
    """The commands under a group, recursively (those with a markup mode: Typer's)."""
    out = []
    for command in getattr(group, "commands", {}).values():
        if hasattr(command, "rich_markup_mode"):
            out.append(command)
        out += _subcommands(command)
    return out


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


app = typer.Typer(
    cls=OmniGroup,
    name="omni",
    help=(
        "Offline text-to-speech toolkit: batch synthesis, load benchmarks and "
        "Seed-TTS-eval WER, with the multi-stage engine (vLLM talker + streaming "
        "codec) embedded in this process tree."
    ),
    no_args_is_help=True,
    add_completion=True,
    context_settings=CONTEXT,
    pretty_exceptions_show_locals=False,
)
app.command("synth", no_args_is_help=True)(synth.synth)
app.command("synth-merge", no_args_is_help=True)(synth_merge.synth_merge)
app.command("bench", cls=bench_vllm.BenchCommand)(bench.bench)
app.command("bench-export", no_args_is_help=True)(bench_export.bench_export)
app.command("eval-wer", no_args_is_help=True)(eval_wer.eval_wer)
app.command("eval", no_args_is_help=True)(eval_cmd.eval_command)
app.command("schema", no_args_is_help=True)(json_schema.schema)
app.command("report", no_args_is_help=True)(report.report)
app.command("env")(env.env)
app.add_typer(profiles.app, name="profiles")
app.add_typer(models.app, name="models")
app.add_typer(datasets.app, name="datasets")


def _version(value: bool) -> None:
    if value:
        from omnicli.environment import version_lines

        for line in version_lines():
            typer.echo(line)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the versions of omni, torch and vLLM, and the device, then exit.",
    ),
) -> None:
    """Offline text-to-speech toolkit."""


def main() -> None:
    app()


if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    main()
