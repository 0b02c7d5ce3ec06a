"""The `omni` command: a Typer app that only wires the subcommands together."""

from __future__ import annotations

import json

import typer

from omnicli.commands import bench, datasets, eval_wer, models, profiles, synth

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
app.add_typer(profiles.app, name="profiles")
app.add_typer(models.app, name="models")
app.add_typer(datasets.app, name="datasets")


@app.command("env")
def env(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Print what a bug report needs: versions, device, paths and omni's environment variables."""
    from omnicli.environment import collect

    facts = collect()
    if as_json:
        typer.echo(json.dumps(facts, indent=2))
        return
    for key, value in facts.items():
        if isinstance(value, dict):
            typer.echo(f"{key}:")
            for sub, item in value.items():
                typer.echo(f"  {sub}: {item if item is not None else '-'}")
        elif isinstance(value, list):
            typer.echo(f"{key}: {', '.join(map(str, value)) or '-'}")
        else:
            typer.echo(f"{key}: {value}")


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
