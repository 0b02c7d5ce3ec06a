"""Shared fixtures. One real engine per test session (vLLM start-up is slow).

The engine lives on an event loop in a background thread, because it is
bound to the loop it started on; tests call `harness.run(coro)` to use it
(`tests.fakes.EngineLoop`), or drive it from a command's own loop through
`tests.fakes.CrossLoopEngine`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO_MANIFEST = REPO / "omnicli" / "data" / "demo" / "meta.lst"
# Small capacities keep the shared engine light on a 2-core machine.
TEST_PROFILE_SETS = ["talker.max_num_seqs=16", "codec.max_num_seqs=16", "talker.kv_cache_space_gb=1"]


@pytest.fixture(scope="session")
def engine_harness():
    """The real omni-tiny engine (vLLM talker + codec), started once per session."""
    from omnicli.engine import Engine
    from omnicli.profile import load_profile
    from tests.fakes import EngineLoop

    harness = EngineLoop(lambda: Engine.start(load_profile("cpu", overrides=TEST_PROFILE_SETS)))
    yield harness
    harness.close()


@pytest.fixture(scope="session")
def engine(engine_harness):
    return engine_harness.engine


@pytest.fixture
def token_engine(monkeypatch):
    """`omni bench` in-process on a TokenEngine (tests/fakes.py) that keeps the requests it was asked."""
    import omnicli.benchmark.entrypoint as bench_entry
    from tests.fakes import TokenEngine

    fake = TokenEngine()

    async def start(resolved):
        return fake

    monkeypatch.setattr(bench_entry, "start_engine", start)
    return fake


@pytest.fixture
def fresh_engine_state(engine_harness, monkeypatch):
    """Undoes the sticky engine-wide failure a test may provoke on the shared engine."""
    monkeypatch.setattr(engine_harness.engine, "_dead", None)
    return engine_harness.engine


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """`tiny_checkpoint(family)`: that family's random-weight checkpoint in the published layout,
    built once per session through `omni models build-tiny` and shared by every test that asks."""
    from typer.testing import CliRunner

    from omnicli.cli import app

    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in built:
            dest = tmp_path_factory.mktemp(family) / "ckpt"
            result = CliRunner().invoke(app, ["models", "build-tiny", family, str(dest)])
            assert result.exit_code == 0, result.output
            built[family] = dest
        return built[family]

    return get


def omni_cli(*args: str, timeout: float = 600, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Runs `python -m omnicli ARGS` in a subprocess (a real CLI run, own engine)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "omnicli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        **kwargs,
    )


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    """A private copy of the demo set (manifest + prompts) to modify freely."""
    dest = tmp_path / "demo"
    shutil.copytree(DEMO_MANIFEST.parent, dest)
    return dest / "meta.lst"


@pytest.fixture
def prompt_folder(tmp_path: Path) -> Path:
    """A manifest folder with one real prompt wav, prompts/p.wav (0.1 s at 16 kHz)."""
    import numpy as np
    import soundfile as sf

    (tmp_path / "prompts").mkdir()
    sf.write(tmp_path / "prompts" / "p.wav", np.zeros(1600, np.float32), 16000)
    return tmp_path


def mount_tmpfs(mount_point: Path, size: str = "256k", read_only: bool = False) -> str | None:
    """Mounts a real tmpfs of `size` at `mount_point`; returns why not, or None."""
    mount_point.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0755" + (",ro" if read_only else "")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    return None if proc.returncode == 0 else f"cannot mount a tmpfs here: {proc.stderr.strip()}"


def unmount(mount_point: Path) -> None:
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def _mounted(mount_point: Path, **options):
    why_not = mount_tmpfs(mount_point, **options)
    if why_not:
        pytest.skip(why_not)
    try:
        yield mount_point
    finally:
        unmount(mount_point)


@pytest.fixture
def small_fs(tmp_path: Path):
    """A real, tiny filesystem (a 256 KiB tmpfs) to fill up: disk-full faults
    without mocks. Needs permission to mount (root in the test container);
    skipped elsewhere."""
    yield from _mounted(tmp_path / "small")


@pytest.fixture
def read_only(tmp_path: Path):
    """A real read-only filesystem (a tmpfs mounted ro): nothing can be written under it."""
    yield from _mounted(tmp_path / "ro", size="64k", read_only=True)


def fill_up(folder: Path, leave: int = 0) -> Path:
    """Fills `folder`'s filesystem with one file until about `leave` bytes stay free."""
    filler = folder / "filler.bin"
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(b"\0" * 4096)
            except OSError:
                break
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.fixture
def no_engine(monkeypatch):
    """Usage errors must be caught before any engine starts: `omni bench`'s engine start fails the test."""
    import omnicli.benchmark.entrypoint as bench_entry

    async def refuse(resolved):
        raise AssertionError("the engine must not start on a usage error")

    monkeypatch.setattr(bench_entry, "start_engine", refuse)

