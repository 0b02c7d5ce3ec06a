"""`omni env`: what a bug report needs (the facts come from `omnicli.environment`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def env(as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
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
