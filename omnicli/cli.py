"""The `omni` command: a Typer app that only wires the subcommands together."""

from __future__ import annotations

import typer

from omnicli import __version__
from omnicli.commands import bench, eval_wer, models, profiles, schema, synth
from omnicli.quiet import quiet_vllm

# Start-up of the `omni` command. Here, not in main(): vLLM's engine-core
# process (spawned) re-imports the command's main module, not main().
quiet_vllm()

app = typer.Typer(
    name="omni",
    help=(
        "Offline text-to-speech toolkit: batch synthesis, load benchmarks and "
        "Seed-TTS-eval WER, with the multi-stage engine (vLLM talker + streaming "
        "codec) embedded in this process tree."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
app.command("synth", no_args_is_help=True)(synth.synth)
app.command("bench")(bench.bench)
app.command("eval-wer", no_args_is_help=True)(eval_wer.eval_wer)
app.command("schema", no_args_is_help=True)(schema.schema)
app.add_typer(profiles.app, name="profiles")
app.add_typer(models.app, name="models")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"omni {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Offline text-to-speech toolkit."""


def main() -> None:
    app()


if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    main()
