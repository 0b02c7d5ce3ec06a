"""Which audio files the page may link or inline: the rows name them, and the rows may come from anyone.

A results row, an eval row, a retention sidecar or a manifest can name any
path (`/home/me/.ssh/id_rsa`, `../../secret.wav`, a wav that is a link to
`/proc/self/environ`); `--embed-audio` would copy its bytes into a page that
gets mailed around, and a link would at least tell where it is. A file is
linked or inlined only when all of these hold:

- its resolved path (links followed) is inside a folder named on the command
  line or the folder of a manifest the report read (`--manifest`, or the one a
  run recorded), and not under /proc, /sys or /dev;
- it is a regular file of at most `MAX_CLIP_BYTES`;
- it starts with the header of a format browsers play (WAV, FLAC, Ogg; MP3 as libsndfile reads it).

Anything else is left out, with the reason, which the page lists by row.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import soundfile as sf

MAX_CLIP_BYTES = 64 * 1024 * 1024  # a 10-minute 48 kHz stereo 16-bit wav is 110 MB; a TTS clip is ~1 MB
SYSTEM_DIRS = (Path("/proc"), Path("/sys"), Path("/dev"))
_SYSTEM = tuple(str(d) for d in SYSTEM_DIRS)
# soundfile's format name -> the MIME type of the data: URI (formats browsers play)
MIME = {"WAV": "audio/wav", "WAVEX": "audio/wav", "FLAC": "audio/flac", "OGG": "audio/ogg", "MP3": "audio/mpeg"}


@dataclass(frozen=True)
class Admitted:
    path: Path  # resolved
    mime: str


@dataclass
class AudioGate:
    roots: list[Path]
    max_bytes: int = MAX_CLIP_BYTES
    _seen: dict[str, Admitted | str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._root_strs = tuple(str(root) for root in self.roots)
        self._folders: dict[str, str] = {}  # folder as named -> resolved

    @classmethod
    def for_folders(cls, folders: list[Path], max_bytes: int = MAX_CLIP_BYTES) -> AudioGate:
        roots: list[Path] = []
        for folder in folders:
            try:
                root = folder.resolve(strict=True)
            except (OSError, RuntimeError, ValueError):
                continue
            if root.is_dir() and root not in roots:
                roots.append(root)
        return cls(roots, max_bytes)

    def admit(self, path: Path) -> Admitted | str:
        """The file to link or inline, or why it may not be (a sentence for the page)."""
        key = os.fspath(path)
        if key not in self._seen:
            self._seen[key] = self._check(path)
        return self._seen[key]

    def read(self, admitted: Admitted) -> bytes | str:
        """The bytes of an admitted file (checked again on the open file), or why they cannot be read."""
        try:
            fd = self._open(admitted.path)
        except _Refused as why:
            return str(why)
        with os.fdopen(fd, "rb") as f:
            data = f.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            return f"over the {self.max_bytes}-byte limit of a clip"
        return data

    def _check(self, path: Path) -> Admitted | str:
        try:
            real = self._resolve(path)
        except (OSError, ValueError):  # missing, a link loop, a NUL in the name
            return "no such file"
        if _inside(real, _SYSTEM):
            return f"resolves to {real}, a system file (/proc, /sys, /dev): never read"
        if not _inside(real, self._root_strs):
            return "outside the folders named on the command line and the manifest's folder"
        try:
            fd = self._open(real)
        except _Refused as why:
            return str(why)
        try:
            mime = _sniff(fd)
        finally:
            os.close(fd)
        if mime is None:
            return "not audio (no header soundfile can read)"
        if mime not in MIME.values():
            return f"{mime} audio, not a format the page plays"
        return Admitted(Path(real), mime)

    def _resolve(self, path: Path) -> str:
        """The path with every link resolved; what is checked is what is opened. The folders are resolved once
        each (a run's wavs share one), the file itself with one lstat unless it is a link."""
        folder, name = os.path.split(os.path.abspath(path))
        real_folder = self._folders.get(folder)
        if real_folder is None:
            real_folder = self._folders[folder] = os.path.realpath(folder, strict=True)
        real = os.path.join(real_folder, name)
        if stat.S_ISLNK(os.lstat(real).st_mode):
            return os.path.realpath(real, strict=True)
        return real

    def _open(self, real: str | Path) -> int:
        # O_NOFOLLOW: the resolved path has no link left; one swapped in since is refused, not followed.
        # O_NONBLOCK: a FIFO swapped in does not block the open.
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags)
        except OSError as exc:
            raise _Refused(f"cannot open: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _Refused("not a regular file")
            if info.st_size > self.max_bytes:
                raise _Refused(f"{info.st_size} bytes, over the {self.max_bytes}-byte limit of a clip")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd


class _Refused(Exception):
    pass


# The magic numbers of the formats the page plays: one 12-byte read tells them apart (a 10,000-row page
# checks 10,000 files); anything else is left to libsndfile.
_MAGIC = ((b"RIFF", b"WAVE", "audio/wav"), (b"RF64", b"WAVE", "audio/wav"), (b"fLaC", b"", "audio/flac"),
          (b"OggS", b"", "audio/ogg"))


def _sniff(fd: int) -> str | None:
    """The MIME type of the audio file open on `fd`, or libsndfile's format name when the page cannot play
    it, or None when it is not audio."""
    head = os.pread(fd, 12, 0)
    for magic, form, mime in _MAGIC:
        if head.startswith(magic) and head[8:12].startswith(form):
            return mime
    try:  # libsndfile on the descriptor itself (ten times faster than through a Python file object)
        with sf.SoundFile(fd, closefd=False) as audio:
            fmt = audio.format
    except Exception:  # (libsndfile's errors vary by version and file)
        return None
    return MIME.get(fmt, fmt)


def _inside(real: str, folders: tuple[str, ...]) -> bool:
    """Whether the resolved path `real` is one of `folders` or below one (string tests: pathlib's are slow)."""
    return any(real == f or real.startswith(f if f.endswith(os.sep) else f + os.sep) for f in folders)
