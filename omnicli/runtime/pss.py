"""Memory of a process tree as the kernel accounts it: summed PSS (shared pages split between sharers).

RSS counts every shared library and mapped weight file once per process, so a tree of vLLM processes
looks several GB larger than it is; PSS divides each shared page among the processes that map it.
"""

from __future__ import annotations

import psutil


def pss_bytes(pid: int) -> int:
    """One process's PSS from /proc/<pid>/smaps_rollup; 0 when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def tree_pss(pid: int) -> tuple[int, int]:
    """(processes, summed PSS in bytes) of `pid` and all its descendants."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0
    return len(procs), sum(pss_bytes(p.pid) for p in procs)
