"""`omni synth`'s signal policy in each phase (SynthConsole; the processes' side is in test_cli_signals.py)."""

from __future__ import annotations

import signal
import threading
from types import SimpleNamespace

import pytest

from omnicli.commands.interrupts import Phase
from omnicli.commands.synth_console import SynthConsole


@pytest.fixture
def console(tmp_path, monkeypatch):
    made = SynthConsole(tmp_path / "meta.lst")
    made.attach(SimpleNamespace(args=SimpleNamespace(grace_s=5.0), save_lock=threading.Lock()))
    made.forced: list[str] = []  # type: ignore[attr-defined]
    monkeypatch.setattr(made, "force_exit", lambda sig: made.forced.append(sig.name))  # type: ignore[attr-defined]
    return made


@pytest.mark.parametrize("phase", [Phase.RUNNING, Phase.CLOSING])
def test_a_first_signal_while_rows_run_or_the_engine_closes_asks_the_run_to_stop(console, phase, capsys):
    # CLOSING: a terminal's Ctrl-C also reaches the native engine's vLLM core, which may shut down
    # (and so close the run) before our handler runs; that one Ctrl-C still means "stop", not "force".
    console.phase = phase
    console.on_first_signal(signal.SIGINT)
    assert console.forced == [] and console.interrupted and console.stop_request.is_set()
    assert "again to force" in capsys.readouterr().err


@pytest.mark.parametrize("phase", [Phase.STARTING])
def test_a_first_signal_during_engine_start_up_forces_the_exit(console, phase):
    console.phase = phase
    console.on_first_signal(signal.SIGTERM)
    assert console.forced == ["SIGTERM"] and console.stop_request.is_set()


def test_nothing_is_forced_once_the_results_are_written(console):
    console.phase = Phase.DONE
    console.on_first_signal(signal.SIGINT)
    assert console.forced == []
