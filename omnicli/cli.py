"""The `omni` command: a Typer app that only wires the subcommands together."""

from __future__ import annotations

import typer

from omnicli.commands import bench, datasets, env, eval_wer, models, profiles, schema, synth
from omnicli.quiet import quiet_vllm

# Start-up of the `omni` command. Here, not in main(): vLLM's engine-core
# process (spawned) re-imports the command's main module, not main().
quiet_vllm()

# `-h` works wherever `--help` does (subcommands inherit the context settings).
CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
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
app.command("bench")(bench.bench)
app.command("eval-wer", no_args_is_help=True)(eval_wer.eval_wer)
app.command("schema", no_args_is_help=True)(schema.schema)
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
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the versions of omni, torch and vLLM, and the device, then exit."),
) -> None:
    """Offline text-to-speech toolkit."""


def main() -> None:
    app()


if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    main()
