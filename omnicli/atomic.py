"""Crash-safe file writes: nothing half-written is ever visible under the final name."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (os.umask
    can only be read by setting it, which races with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tmp_path_for(path: Path) -> tuple[int, str]:
    # The temp file lives beside the target so os.replace stays on one filesystem.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp creates 0600; the finished file gets the mode any new file gets (0666 less the umask).
    os.fchmod(fd, 0o666 & ~current_umask())
    return fd, tmp


@contextmanager
def _replacing(path: Path) -> Iterator[BinaryIO]:
    """A binary file under a temp name beside `path`, synced and renamed over `path`
    when the block ends; removed instead when it raises (Ctrl-C included)."""
    fd, tmp = _tmp_path_for(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(path) as f:
        f.write(data)
    return path


# link() failures that mean "no hard link here" (another file system, or one without
# hard links, or too many links to the inode), not a problem of the destination.
_NO_HARD_LINK = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP})


def link_or_copy_atomic(src: str | os.PathLike, dst: str | os.PathLike) -> bool:
    """Puts `src`'s content at `dst`, whole or not at all: a hard link when both lie on
    one file system (no bytes copied), otherwise a copy. True when it was linked.

    Either way the file gets a temp name beside `dst` first, so a crash never
    leaves a partial `dst` (and the temp name follows `_tmp_path_for`'s pattern,
    so the tidy-up of a killed run finds it).
    """
    src, dst = Path(src), Path(dst)
    if not dst.parent.is_dir():
        dst.parent.mkdir(parents=True, exist_ok=True)
    with suppress(OSError):
        if os.path.samefile(src, dst):  # merged before: renaming a link onto its own file would leave the temp link
            return True
    tmp = dst.parent / f".{dst.name}.{secrets.token_hex(4)}.tmp"
    try:
        os.link(src, tmp)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINK:
            raise
    else:
        try:
            os.replace(tmp, dst)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return True
    with _replacing(dst) as f, open(src, "rb") as source:
        shutil.copyfileobj(source, f, 1 << 20)
    return False


def folder_write_error(folder: str | os.PathLike) -> str | None:
    """Why a file cannot be written into `folder` (created when missing), or None: checked
    by writing 4 KiB to a temp file and removing it, before work whose results go there."""
    folder = Path(folder)
    blocking = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        return f"cannot write into {folder}: {blocking} is not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".omni-write-check-", suffix=".tmp", dir=folder)
        try:
            os.write(fd, b"\0" * 4096)  # a full disk still takes an empty file
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as exc:
        return f"cannot write into {folder}: {exc.strerror or exc}"
    return None


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


class JsonlAppender:
    """Appends one JSON object per line, each line written whole and fsynced.

    When a write fails part-way (disk full, I/O error) the file is cut back to
    the last whole line before the error is raised, so rows are whole or
    absent. A crash can at worst leave an unterminated last line; `read_jsonl`
    drops it and the next append starts on a fresh line.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = False
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                needs_newline = f.read(1) != b"\n"
        # Unbuffered: a buffered writer would keep the unwritten part of a failed
        # line and write it later (at close), tearing the file after all.
        self._f = open(self.path, "ab", buffering=0)
        if needs_newline:  # seal a torn line left by a crash
            self._write_whole(b"\n")

    def append(self, row: dict) -> None:
        self._write_whole(json.dumps(row, ensure_ascii=False, default=str).encode("utf-8") + b"\n")

    def _write_whole(self, data: bytes) -> None:
        fd = self._f.fileno()
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:  # O_APPEND: every write lands at the end
                view = view[self._f.write(view):]
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, start)  # shrinking needs no space
            except OSError:
                pass  # left torn; read_jsonl skips it and resume rewrites the file
            raise

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yields the intact JSON objects of a JSONL file, skipping torn or blank lines."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line from an interrupted write
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict):
                yield obj


def jsonl_lines(path: str | os.PathLike) -> Iterator[bytes]:
    """Yields the whole non-blank lines of a JSONL file (each with its newline), without
    parsing them; a torn last line is left out."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # torn last line from an interrupted write
            if raw.strip():
                yield raw


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))
