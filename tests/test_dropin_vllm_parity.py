"""Issue 32 item 8: what vLLM computes and omni computes again, compared with vLLM's own functions (imported
from the installed vLLM) on the same inputs, so an upgrade that changes theirs fails here: the result file
name (`compute_result_filename`) and the goodput pairs (`parse_goodput`). Continuity and underrun against
vLLM-Omni's `audio_continuity`: tests/test_dropin_continuity.py."""

from __future__ import annotations

import argparse
import math

import pytest

from omnicli.benchmark.metrics import parse_goodput
from omnicli.benchmark.vllm_format import result_filename

serve = pytest.importorskip("vllm.benchmarks.serve", reason="vLLM is not installed")


def _args(**kw) -> argparse.Namespace:
    base = {"plot_timeline": False, "save_result": True, "append_result": False, "max_concurrency": None,
            "backend": "openai", "ramp_up_strategy": None, "ramp_up_start_rps": None, "ramp_up_end_rps": None,
            "request_rate": math.inf, "result_filename": None, "result_dir": None}
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("shape", [
    {"request_rate": math.inf},
    {"request_rate": 2.0, "max_concurrency": 8},
    {"request_rate": 0.5, "max_concurrency": 1},
    {"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 5, "max_concurrency": 4},
    {"ramp_up_strategy": "exponential", "ramp_up_start_rps": 2, "ramp_up_end_rps": 16},
])
def test_result_file_names_are_vllms(shape):
    rate = shape.get("request_rate", math.inf)
    doc = {"label": "omni", "model_id": "org/omni-tiny", "date": "20260101-000000",
           "request_rate": "inf" if math.isinf(rate) else rate, "max_concurrency": shape.get("max_concurrency"),
           "ramp_up_strategy": shape.get("ramp_up_strategy"), "ramp_up_start_rps": shape.get("ramp_up_start_rps"),
           "ramp_up_end_rps": shape.get("ramp_up_end_rps")}
    theirs = serve.compute_result_filename(_args(**shape), "org/omni-tiny", "omni", "20260101-000000")
    assert result_filename(doc) == theirs


def test_goodput_pairs_parse_as_vllms():
    pairs = ["ttft:250", "tpot:12.5", "e2el:3000"]
    assert parse_goodput(pairs) == serve.parse_goodput(pairs)
    for bad in (["ttft"], ["ttft:x"]):  # both refuse what vLLM refuses
        with pytest.raises((ValueError, argparse.ArgumentTypeError)):
            serve.parse_goodput(bad)
        with pytest.raises(ValueError):
            parse_goodput(bad)
