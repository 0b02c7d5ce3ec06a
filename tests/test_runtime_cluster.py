"""How `RayCluster` starts Ray: quiet unless --verbose, no colour codes in files, its
session folders in the user's cache (a stand-in `ray` module records what `ray.init` is
given; starting Ray itself is tests/test_synth_ray.py's)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from omnicli.runtime import cluster as cluster_module
from omnicli.runtime.cluster import EngineResources, RayCluster, ray_temp_dir


@pytest.fixture
def fake_ray(monkeypatch):
    calls = []
    ray = SimpleNamespace(is_initialized=lambda: False, init=lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(cluster_module, "import_ray", lambda: ray)
    monkeypatch.setattr(cluster_module, "quiet_ray_data", lambda quiet: None)
    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.delenv("RAY_IGNORE_UNHANDLED_ERRORS", raising=False)
    return calls


SHORT_CACHE = f"/tmp/omni-c-{os.getpid()}"  # short enough for Ray's socket paths whatever the test's temp folder


@pytest.fixture(autouse=True)
def _no_short_cache_left():
    yield
    shutil.rmtree(SHORT_CACHE, ignore_errors=True)


def test_a_quiet_cluster_keeps_rays_own_lines_and_colours_out(fake_ray, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE_DIR", SHORT_CACHE)
    RayCluster(None, EngineResources(), quiet=True).open()
    (kwargs,) = fake_ray
    # was: Ray's WARNING/ERROR lines between our bar's lines, colour codes in a log file, /tmp/ray
    assert (
        kwargs["logging_level"] == logging.CRITICAL
        and kwargs["log_to_driver"] is False
        and kwargs["configure_logging"] is False
    )
    assert os.environ["RAY_COLOR_PREFIX"] == "0" and os.environ["RAY_IGNORE_UNHANDLED_ERRORS"] == "1"
    assert kwargs["_temp_dir"] == f"{SHORT_CACHE}/ray"


def test_a_verbose_cluster_shows_rays_logs(fake_ray, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "c"))
    RayCluster(None, EngineResources(), quiet=False).open()
    (kwargs,) = fake_ray
    assert kwargs["configure_logging"] is True and "logging_level" not in kwargs and "log_to_driver" not in kwargs


def test_a_joined_cluster_keeps_its_own_temp_folder(fake_ray, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "c"))
    RayCluster("auto", EngineResources()).open()
    assert "_temp_dir" not in fake_ray[0] and fake_ray[0]["address"] == "auto"


def test_the_temp_folder_fits_rays_socket_paths_and_old_sessions_go(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / ("x" * 80)))  # Ray's sockets would not fit below it
    assert ray_temp_dir() == ray_temp_dir().parent / f"omni-ray-{os.getuid()}"
    monkeypatch.setenv("OMNI_CACHE_DIR", SHORT_CACHE)
    folder = ray_temp_dir()
    assert folder == Path(SHORT_CACHE) / "ray"
    old, new = folder / "session_2020-01-01_00-00-00_000000_1", folder / "session_2999-01-01_00-00-00_000000_2"
    old.mkdir(parents=True, exist_ok=True)
    new.mkdir(parents=True, exist_ok=True)
    week_ago = time.time() - 8 * 86400
    os.utime(old, (week_ago, week_ago))
    assert ray_temp_dir() == folder and not old.exists() and new.exists()
    new.rmdir()
