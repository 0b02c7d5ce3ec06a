"""Options and helpers shared by every command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console, ConsoleDimensions

# Width of output that is not a terminal (a file, a pipe, a test runner): wide
# enough that no line is ever wrapped, so scripts and tests can read every line.
NOT_A_TERMINAL_WIDTH = 100_000


class CliConsole(Console):
    """A Rich console that only wraps lines on a real terminal.

    Rich fixes the width from COLUMNS when the console is made (at import) and
    otherwise asks whichever standard stream is a terminal, so output piped to a
    file would wrap error lines mid-path at a width that depends on the shell the
    command happened to start from. Here the width is decided at each print: the
    terminal's own width when this console writes to one, otherwise
    NOT_A_TERMINAL_WIDTH (tables keep their natural width; text never wraps).
    """

    def _writes_to_terminal(self) -> bool:
        isatty = getattr(self.file, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # closed stream
            return False

    @property
    def size(self) -> ConsoleDimensions:
        if self._writes_to_terminal():
            return super().size
        return ConsoleDimensions(NOT_A_TERMINAL_WIDTH, super().size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console = CliConsole()
err_console = CliConsole(stderr=True)

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
        return load_profile(profile, overrides=sets or [])
    except ProfileError as exc:
        err_console.print(f"[red]profile error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
