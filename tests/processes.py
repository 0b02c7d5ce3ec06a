"""Finding a CLI run's processes, whatever its process tree became: each run sets a
unique OMNI_TEST_MARK in its environment, which every child (vLLM included) inherits."""

from __future__ import annotations

import time

import psutil


def marked_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("OMNI_TEST_MARK") == marker:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_gone(marker: str, timeout: float) -> list[str]:
    """Waits up to `timeout` for the run's processes to end; returns those still there
    ("pid name"), after killing them: never leave them running on the test machine."""
    deadline = time.monotonic() + timeout
    while (left := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    names = []
    for proc in left:
        try:
            names.append(f"{proc.pid} {proc.name()}")
            proc.kill()
        except psutil.Error:
            pass
    return names
