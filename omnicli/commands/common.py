"""Options and helpers shared by every command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

# Exit codes (documented in README): 0 all good, 1 some rows/requests failed,
# 2 bad usage or input (typer's own), 3 the engine could not start or died,
# 130 interrupted by Ctrl-C / SIGTERM.
EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
EXIT_ENGINE = 3
EXIT_INTERRUPTED = 130

ProfileOption = Annotated[
    Optional[str],
    typer.Option(
        "--profile",
        "-p",
        help="Preset name (see `omni profiles list`) or path to a YAML file.",
        show_default="default",
    ),
]
SetOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        "-s",
        help="Override one profile key, e.g. --set codec.max_num_seqs=32 (repeatable).",
    ),
]


def resolve_profile(profile: str | None, sets: list[str] | None):
    """Load and validate a profile, turning errors into a clean usage exit."""
    from omnicli.profile import ProfileError, load_profile

    try:
        return load_profile(profile, overrides=sets or [])
    except ProfileError as exc:
        err_console.print(f"[red]profile error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
