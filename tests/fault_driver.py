"""Runs the real `omni` CLI with one OS fault injected, for tests that need the whole process.

    OMNI_FAULT_RESULTS_ROWS=N python tests/fault_driver.py synth ...

lets N rows reach OUT/results.jsonl and then fails every later append with
ENOSPC, as a disk that fills up mid-run does. Nothing else is changed.
"""

from __future__ import annotations

import errno
import os


def _results_fill_up_after(rows: int) -> None:
    from omnicli import atomic

    real_append = atomic.JsonlAppender.append
    written = {"rows": 0}

    def append(self, row):
        if self.path.name == "results.jsonl":
            if written["rows"] >= rows:
                raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
            written["rows"] += 1
        real_append(self, row)

    atomic.JsonlAppender.append = append


def main() -> None:
    if "OMNI_FAULT_RESULTS_ROWS" in os.environ:
        _results_fill_up_after(int(os.environ["OMNI_FAULT_RESULTS_ROWS"]))
    from omnicli.cli import main as omni

    omni()


if __name__ == "__main__":  # vLLM spawns workers that re-import this file: the guard is required
    main()
