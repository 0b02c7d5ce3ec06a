"""Reading files other people wrote: only regular files, only up to a size bound.

A name a user passes (a report source, a deploy config, a bench result to
append to, a transcript file) may be a FIFO, a link to /dev/zero or a
multi-gigabyte file: `Path.read_text` would block forever on the first and
read until memory runs out on the others. `read_user_text` opens without
blocking, checks the opened file (not the name: no race with a swapped link)
is a regular file, and reads at most `max_bytes`.

JSONL is split on "\\n" only: `str.splitlines` also splits on U+2028, U+2029,
U+0085 and other Unicode line breaks, which our JSON writers leave raw inside
strings (a row whose text holds one would be cut in two and dropped).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MiB = 1024 * 1024
# Result files of a long run (100k rows of results.jsonl) stay under this.
DEFAULT_MAX_BYTES = 256 * MiB


class UserFileError(ValueError):
    """A user-named file that is not a readable regular file within the size bound."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def read_user_bytes(path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The whole content of the regular file `path` (links followed), at most
    `max_bytes`. Raises UserFileError for anything else (missing, a folder, a
    FIFO, a device, too large, unreadable)."""
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserFileError(path, "no such file") from None
    except IsADirectoryError:
        raise UserFileError(path, "is a folder, not a file") from None
    except OSError as exc:
        raise UserFileError(path, f"cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserFileError(path, "is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise UserFileError(path, "is not a regular file (a FIFO, socket or device); refused")
        if info.st_size > max_bytes:
            raise UserFileError(path, f"is {info.st_size} bytes, over the {max_bytes}-byte limit for this file")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(MiB, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # grew while we read it
                raise UserFileError(path, f"is over the {max_bytes}-byte limit for this file")
        return b"".join(chunks)
    except OSError as exc:
        raise UserFileError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_user_text(
    path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES, encoding: str = "utf-8"
) -> str:
    """`read_user_bytes` decoded; a file that is not valid `encoding` raises UserFileError."""
    data = read_user_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UserFileError(Path(path), f"is not {encoding} text (byte {exc.start})") from None


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, split on "\\n" only (a trailing "\\r" dropped)."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
