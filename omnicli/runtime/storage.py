"""Is the output folder shared storage? Workers write wavs straight into it, so on a
cluster every engine's node must see the same folder as the coordinator."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path

PROBE_PREFIX = ".omni-probe-"


class StorageNotShared(RuntimeError):
    """A worker cannot see the coordinator's output folder."""


def write_probe(out_dir: Path) -> Path:
    """A file only this run knows the name of; workers look for it (see `check_probe`)."""
    probe = out_dir / f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    probe.write_text(socket.gethostname())
    return probe


def check_probe(probe: Path) -> None:
    """Run on a worker: StorageNotShared unless the coordinator's probe file is visible here."""
    if not probe.is_file():
        raise StorageNotShared(
            f"node {socket.gethostname()} cannot see {probe.parent} (the coordinator's probe file {probe.name} "
            "is missing): "
            "--out must be on storage shared by every node (NFS, a cluster file system)"
        )


def remove_stale_probes(out_dir: Path) -> int:
    """Removes probe files a killed coordinator left (call holding OUT's lock: no other run's
    probe can be live). Returns how many."""
    removed = 0
    for probe in out_dir.glob(f"{PROBE_PREFIX}*"):
        with contextlib.suppress(OSError):
            probe.unlink()
            removed += 1
    return removed


def remove_probe(probe: Path) -> None:
    try:
        os.unlink(probe)
    except OSError:
        pass

