"""No orphaned engine processes, however this process ends.

vLLM runs its engine core in a child process that does not notice when its
parent is killed with SIGKILL: it keeps running (and holding memory) for
ever. `OrphanGuard` starts a small watcher process in its own session that
holds the read end of a pipe from us and notes our new child processes as
they appear. When we die in any way the pipe closes and the watcher
terminates those processes and their descendants. A normal shutdown disarms
it first. Given a run folder (run_folder.py), it also notes there the children it
sees and removes the folder after ending them.

Run as `python -m omnicli.runtime.orphans PARENT_PID RUN_FOLDER|- [EXCLUDED_PID ...]` it is that watcher.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import psutil

from omnicli.runtime import run_folder

log = logging.getLogger(__name__)

TERM_GRACE_S = 2.0  # SIGTERM first (lets vLLM unlink its shared memory), SIGKILL after this
POLL_S = 0.5  # how often the watcher looks for new children of its parent
_DISARM = b"disarm\n"


# How multiprocessing starts its resource tracker: `python [flags] -c "<this>main(FD)"`.
_TRACKER_CODE = "from multiprocessing.resource_tracker import main;main("


def is_resource_tracker(proc: psutil.Process) -> bool:
    """multiprocessing's resource tracker exits by itself once its users are gone and must
    outlive them to unlink their shared memory, so it is never killed here."""
    with contextlib.suppress(psutil.Error):
        return is_tracker_command(proc.cmdline())
    return False


def is_tracker_command(cmdline: list[str]) -> bool:
    """The tracker's own command line: its code is the `-c` program. Matched exactly, not by a
    word anywhere: every process we spawn carries `-Wignore:resource_tracker:UserWarning`
    (commands/interrupts.py), and a stage worker must not pass for a tracker."""
    return any(flag == "-c" and code.startswith(_TRACKER_CODE) for flag, code in zip(cmdline, cmdline[1:]))


def terminate_tree(procs: Iterable[psutil.Process], grace_s: float = TERM_GRACE_S) -> list[int]:
    """SIGTERM `procs` and their descendants, SIGKILL what is left after `grace_s`.

    Returns the pids that had to be killed. Resource trackers are spared.
    """
    everyone: dict[int, psutil.Process] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            for p in [proc, *proc.children(recursive=True)]:
                if not is_resource_tracker(p):
                    everyone[p.pid] = p
    alive = list(everyone.values())
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    if grace_s > 0:
        _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=2.0)
    return [p.pid for p in alive]


def terminate_children(grace_s: float = TERM_GRACE_S) -> list[int]:
    """Ends every child process of this process (and their descendants), resource trackers spared."""
    return terminate_tree(psutil.Process().children(), grace_s)


class OrphanGuard:
    """Terminates the child processes this process starts from now on, if it dies before `disarm()`;
    then removes `folder` (a `RunFolder`'s path), noting in it meanwhile the children it sees."""

    def __init__(self, folder: Path | None = None) -> None:
        me = os.getpid()
        existing = [str(p.pid) for p in psutil.Process(me).children()]
        self._watcher: subprocess.Popen[bytes] | None = None
        try:
            self._watcher = subprocess.Popen(
                [sys.executable, "-m", "omnicli.runtime.orphans", str(me), str(folder or "-"), *existing],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to our process group must not end the watcher
            )
        except OSError as exc:  # a safety net only: the engine works without it
            log.warning("could not start the orphan guard: %s", exc)

    @property
    def watcher_pid(self) -> int | None:
        return self._watcher.pid if self._watcher else None

    def disarm(self) -> None:
        """Normal shutdown: the watcher exits without touching anything."""
        watcher, self._watcher = self._watcher, None
        if watcher is None:
            return
        with contextlib.suppress(OSError, ValueError):
            if watcher.stdin is not None:  # always: it was started with stdin=PIPE
                watcher.stdin.write(_DISARM)
                watcher.stdin.close()
        try:
            watcher.wait(5.0)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()


def _watch(parent_pid: int, folder: Path | None, excluded: set[int]) -> None:
    """Notes the parent's new children until it says `disarm` or dies (EOF), then ends them
    and removes `folder`."""
    excluded.add(os.getpid())
    known: dict[int, psutil.Process] = {}
    stdin = sys.stdin.buffer.fileno()
    data = b""
    while True:
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(parent_pid).children():
                if p.pid not in excluded and p.pid not in known and not is_resource_tracker(p):
                    known[p.pid] = p
                    if folder is not None:
                        run_folder.note_pids(folder, [p.pid])
        ready, _, _ = select.select([stdin], [], [], POLL_S)
        if not ready:
            continue
        chunk = os.read(stdin, 64)
        if not chunk:
            break  # the parent is gone
        data += chunk
        if _DISARM in data:
            return
    # psutil.Process remembers the create time: a recycled pid is not signalled.
    terminate_tree([p for p in known.values() if p.is_running()])
    if folder is not None:
        run_folder.remove_folder(folder, [parent_pid, *known])


if __name__ == "__main__":
    _watch(int(sys.argv[1]), None if sys.argv[2] == "-" else Path(sys.argv[2]), {int(a) for a in sys.argv[3:]})
