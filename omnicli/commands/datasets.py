"""`omni datasets`: the datasets shipped inside the package and where they are."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from omnicli.errors import UsageError
from omnicli.runtime.console import console

app = typer.Typer(
    help="Datasets shipped with omnicli (the demo set), usable without the repository.", no_args_is_help=True
)


@app.command("list")
def list_datasets() -> None:
    """List the shipped datasets and their folders."""
    from omnicli.datasets import DATASETS, dataset_dir

    table = Table("name", "folder", "description")
    for name, description in DATASETS.items():
        table.add_row(name, str(dataset_dir(name)), description)
    console.print(table)


@app.command("path", no_args_is_help=True)
def path(name: Annotated[str, typer.Argument(help="Dataset name, e.g. demo.")]) -> None:
    """Print the manifest path of a shipped dataset (for scripts: `omni synth "$(omni datasets path demo)"`)."""
    from omnicli.datasets import DATASETS, dataset_dir

    if name not in DATASETS:
        raise UsageError(f"unknown dataset {name!r} (shipped: {', '.join(sorted(DATASETS))})")
    typer.echo(str(dataset_dir(name) / "meta.lst"))
