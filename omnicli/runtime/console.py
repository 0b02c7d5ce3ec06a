"""The consoles every command and output plug-in prints through, and the verbosity they obey.

Chatter and progress go to stderr (`err_console`), results to stdout
(`console`); neither wraps lines unless it writes to a terminal. `note` and
`status` are silent with --quiet; `set_verbosity` applies --quiet/--verbose
to them and to the library's logs.
"""

from __future__ import annotations

import contextlib
import logging

from rich.console import Console, ConsoleDimensions

from omnicli.errors import UsageError

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

class _Verbosity:
    quiet = False
    verbose = False


VERBOSITY = _Verbosity()


def set_verbosity(quiet: bool, verbose: bool) -> None:
    """Applies --quiet / --verbose for this command (exclusive: both is a usage error)."""
    if quiet and verbose:
        raise UsageError("--quiet and --verbose exclude each other")
    VERBOSITY.quiet, VERBOSITY.verbose = quiet, verbose
    level = logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    logging.getLogger("omnicli").setLevel(level)


def note(message: str) -> None:
    """A status line on stderr (engine ready, resuming, ...); silent with --quiet."""
    if not VERBOSITY.quiet:
        err_console.print(message, highlight=False)


def status(message: str) -> contextlib.AbstractContextManager[object]:
    """A spinner on a terminal, one note line otherwise, nothing with --quiet."""
    if VERBOSITY.quiet:
        return contextlib.nullcontext()
    if err_console.is_terminal:
        return err_console.status(message)
    err_console.print(message, highlight=False)
    return contextlib.nullcontext()


def fmt_number(value: object, digits: int = 2) -> str:
    """A table cell: '-' for no value, on/off for flags, floats with `digits` decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)
