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
        help="Profile name (profiles/NAME.yaml, see `omni profiles list`) or path to a YAML file.",
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
        resolved = load_profile(profile, overrides=sets or [])
    except ProfileError as exc:
        err_console.print(f"[red]profile error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    p = resolved.profile
    if p.model != "omni-tiny":  # omni-tiny builds itself; the others must be on disk
        from omnicli.engine.models import check_checkpoints
        from omnicli.engine.models.checkpoints import CheckpointMissing

        try:  # before any engine starts: a missing checkpoint is bad usage, not an engine failure
            check_checkpoints(p.model, p.model_path, p.codec_path)
        except CheckpointMissing as exc:
            err_console.print("[red]checkpoint missing:[/red]")
            err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None
    return resolved
