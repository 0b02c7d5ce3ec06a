"""A private folder for one engine's runtime files, removed on every exit path.

vLLM-Omni leaves files behind after every run, a clean one included:

- vLLM's ZMQ IPC sockets, named `<VLLM_RPC_BASE_PATH>/<uuid4>` (vllm.utils.network_utils.
  get_open_zmq_ipc_path; the base defaults to the temp folder). The engine points
  VLLM_RPC_BASE_PATH into its `RunFolder`, so they go when the folder goes.
- vLLM-Omni's shared-memory wake-up folders, `/dev/shm/omni_shm_wake_<uid>_<pid>` where pid is
  the parent of the process that receives (vllm_omni ... shm_connector._wakeup_directory): a stage
  engine-core process, or ours when a stage runs its worker in-process. Their place is fixed, so
  they are removed by name, once the process that names them is gone.
- multiprocessing semaphores a stage process made and a forced exit left unlinked, named
  `/dev/shm/sem.loky-<pid>-<n>` once joblib's loky is imported (it renames them): removed by
  name the same way.

The folder is `omni-run-<our pid>-<random>` in the temp folder, or in /tmp when the temp folder's
path is too long for the sockets below it (an AF_UNIX path holds 107 bytes). `remove()` is the normal way out
(engine closed, or its start failed); `remove_live()` is a forced exit's (Ctrl-C twice, SIGTERM
during start-up: `os._exit` runs no `finally`); the orphan guard's watcher removes it when we are
killed (SIGKILL); and `sweep()`, at the next engine start, removes folders whose owner is dead and
whose watcher did not (it was killed too).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import psutil

PREFIX = "omni-run-"
SOCKET_PATH_MAX = 107  # bytes in an AF_UNIX socket path (sun_path, less its NUL)
SOCKET_NAME_LEN = 37  # what vLLM puts below VLLM_RPC_BASE_PATH: "/" + a uuid4
SHORT_BASE = Path("/tmp")
PIDS_FILE = "pids"  # processes whose wake-up folders are ours to remove, one pid a line
SHM_ROOT = Path("/dev/shm")

_live: dict[Path, RunFolder] = {}


def wake_dir(pid: int, shm_root: Path = SHM_ROOT) -> Path:
    """vLLM-Omni's wake-up folder for the receivers whose parent is `pid`."""
    return shm_root / f"omni_shm_wake_{os.getuid()}_{pid}"


class RunFolder:
    """`omni-run-<pid>-<random>/` in `base` (the temp folder); see the module docstring."""

    def __init__(self, base: Path | None = None, shm_root: Path = SHM_ROOT):
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base or default_base()))
        self.shm_root = shm_root
        _live[self.path] = self

    def note_pids(self, pids: Iterable[int]) -> None:
        """Records processes whose wake-up folders are ours (for whoever removes this folder)."""
        note_pids(self.path, pids)

    def remove(self, pids: Iterable[int] = ()) -> None:
        """After the engine's processes have ended: the folder, and the wake-up folders of ours,
        of `pids` and of the noted processes. Safe to call more than once."""
        _live.pop(self.path, None)
        mine = [] if _live else [os.getpid()]  # another engine of this process may still use ours
        remove_folder(self.path, [*mine, *pids], self.shm_root)


def default_base() -> Path:
    """The temp folder, unless vLLM's socket paths below a run folder there would not fit."""
    base = Path(tempfile.gettempdir())
    longest = len(os.fsencode(base)) + len(f"/{PREFIX}{os.getpid()}-12345678") + SOCKET_NAME_LEN
    return base if longest <= SOCKET_PATH_MAX else SHORT_BASE


def note_pids(folder: Path, pids: Iterable[int]) -> None:
    with contextlib.suppress(OSError), open(folder / PIDS_FILE, "a") as f:
        f.writelines(f"{pid}\n" for pid in pids)


def remove_live(pids: Iterable[int] = ()) -> None:
    """A forced exit's clean-up (after the engine's processes were ended): every folder still open."""
    pids = list(pids)
    for folder in list(_live.values()):
        folder.remove(pids)


def remove_folder(folder: Path, pids: Iterable[int] = (), shm_root: Path = SHM_ROOT) -> None:
    """Removes the wake-up folders of `pids` and of those noted in `folder` whose process is gone
    (or is `pids`' caller), then `folder` itself."""
    candidates = set(pids) | _noted_pids(folder)
    for pid in sorted(candidates):
        if pid == os.getpid() or _gone(pid):
            shutil.rmtree(wake_dir(pid, shm_root), ignore_errors=True)
        if pid != os.getpid() and _gone(pid):
            for semaphore in shm_root.glob(f"sem.loky-{pid}-*"):
                with contextlib.suppress(OSError):
                    semaphore.unlink()
    shutil.rmtree(folder, ignore_errors=True)


def sweep(base: Path | None = None, shm_root: Path = SHM_ROOT) -> list[Path]:
    """Removes the run folders (and their wake-up folders) of runs that are no longer running,
    in `base` (default: the temp folder and /tmp, where `default_base` may put them)."""
    bases = [base] if base is not None else sorted({Path(tempfile.gettempdir()), SHORT_BASE})
    swept = []
    for where in bases:
        with contextlib.suppress(OSError):
            for folder in where.glob(f"{PREFIX}*-*"):
                owner = _owner_pid(folder)
                if owner is None or not _gone(owner) or not folder.is_dir() or folder.is_symlink():
                    continue
                remove_folder(folder, [owner], shm_root)
                swept.append(folder)
    return swept


def _owner_pid(folder: Path) -> int | None:
    pid = folder.name[len(PREFIX):].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def _noted_pids(folder: Path) -> set[int]:
    try:
        text = (folder / PIDS_FILE).read_text()
    except (OSError, UnicodeDecodeError):
        return set()
    return {int(word) for word in text.split() if word.isdigit()}


def _gone(pid: int) -> bool:
    """Not running (a zombie is gone: it runs nothing and holds nothing of these files)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
