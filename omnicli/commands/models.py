"""`omni models`: list the model families and build the embedded one ahead of time."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from omnicli.commands.common import console, err_console

app = typer.Typer(help="Model families the engine can run.", no_args_is_help=True)


@app.command("list")
def list_models() -> None:
    """List known model families."""
    from omnicli.engine.models import MODELS

    table = Table("model", "description")
    for name, description in MODELS.items():
        table.add_row(name, description)
    console.print(table)


@app.command("build")
def build_model(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the cache already holds it."),
) -> None:
    """Build omni-tiny into the cache now (otherwise it happens on first use)."""
    from omnicli.engine.models import omni_tiny

    with err_console.status("building omni-tiny"):
        path = omni_tiny.build(force=force)
    info = json.loads((path / "BUILD_OK").read_text())
    console.print(f"[green]omni-tiny[/green] at {path}")
    console.print_json(data=info)
