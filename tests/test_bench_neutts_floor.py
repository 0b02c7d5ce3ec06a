"""The first-audio floor of scripts/bench_neutts.py: queued prefills back to back, then the request's first chunk."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_neutts.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_neutts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_neutts"] = module
    spec.loader.exec_module(module)
    return module


def test_requests_submitted_together_wait_for_the_prefills_ahead_of_them(bench):
    floors = bench.first_audio_floors([0.0, 0.0, 0.0], [100, 200, 100], 0.01, 0.5)
    assert floors == pytest.approx([1.0 + 0.5, 3.0 + 0.5, 4.0 + 0.5])


def test_a_request_after_the_queue_has_drained_pays_only_its_own_prefill(bench):
    floors = bench.first_audio_floors([0.0, 10.0, 10.5], [100, 100, 100], 0.01, 0.2)
    assert floors == pytest.approx([1.2, 1.2, 0.5 + 1.0 + 0.2])  # the third waits 0.5 s for the second's prefill
