"""Text from files other people wrote, made safe to print on a terminal.

A profile label, a model name or an error kept in a result file may hold
terminal escape sequences (`ESC[2J` clears the screen, OSC 8 makes a hidden
link, OSC 52 writes the clipboard) or Rich markup (`[link=...]`, `[on red]`):
printed as they are, they act on the terminal instead of showing. `printable`
removes escape sequences and other control characters (tabs and newlines
kept); `rich_literal` also escapes Rich markup, so it shows as typed.
"""

from __future__ import annotations

import re

from rich.markup import escape

_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen clears
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (links, titles, clipboard), DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # the other C0 and C1 controls (tab and newline kept)
)


def printable(text: object) -> str:
    """`text` without terminal escape sequences or control characters other than tab and newline."""
    return _CONTROLS.sub("", str(text))


def rich_literal(text: object) -> str:
    """`printable(text)` with Rich markup escaped: for strings passed to a Rich console or table."""
    return escape(printable(text))
