"""Issue 32 item 8: what vLLM computes and omni computes again, compared with vLLM's own functions (imported
from the installed vLLM) on the same inputs, so an upgrade that changes theirs fails here: the result file
name (`compute_result_filename`), the goodput pairs (`parse_goodput`), the one-second peaks
(`calculate_metrics`) and the `--save-result` / `--append-result` writer (the block of `main_async` that
writes the file, run as it stands). Continuity and underrun against vLLM-Omni's `audio_continuity`:
tests/test_dropin_continuity.py; the deploy base_config merge: tests/test_dropin_deploy_parity.py; DNSMOS
against speechmos: tests/test_eval_sim_mos.py."""

from __future__ import annotations

import argparse
import inspect
import json
import math
import random
import textwrap

import pytest

from omnicli.benchmark.metrics import parse_goodput, peak_figures
from omnicli.benchmark.vllm_format import result_filename, write_result
from omnicli.driver.records import RequestRecord
from omnicli.engine.request import RequestInfo

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


def _requests(seed: int) -> list[RequestRecord]:
    """Overlapping requests over a few seconds, each with its talker output times; every fifth one failed."""
    rng = random.Random(seed)
    records = []
    for i in range(12):
        start = 100.0 + rng.uniform(0, 4)
        times = [start + rng.uniform(0.05, 0.4)]
        for _ in range(rng.randint(0, 24)):
            times.append(times[-1] + rng.uniform(0.01, 0.3))
        info = RequestInfo(talker_tokens=len(times), prompt_tokens=10, first_token_at=times[0], token_times=times)
        record = RequestRecord(f"u{i}", f"r{i}", start, times[-1] + 0.05, 24000, chunk_times=[times[-1]],
                               chunk_samples=[4800], info=info, error="boom" if i % 5 == 4 else None)
        records.append(record)
    return records


def _vllm_output(record: RequestRecord):
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    if not record.nonempty:
        return RequestFuncOutput(success=False, error=record.error or "", start_time=record.start)
    return RequestFuncOutput(success=True, start_time=record.start, latency=record.end - record.start,
                             ttft=record.ttft, itl=record.itl, output_tokens=record.output_tokens, prompt_len=10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_second_peaks_are_vllms(seed, capsys):
    from vllm.benchmarks.datasets import SampleRequest

    records = _requests(seed)
    inputs = [SampleRequest(prompt=r.utt, prompt_len=10, expected_output_len=1) for r in records]
    metrics, _ = serve.calculate_metrics(inputs, [_vllm_output(r) for r in records], 10.0, None, [99.0], {})
    capsys.readouterr()  # vLLM prints the failures and a tip
    assert peak_figures(records) == (metrics.max_output_tokens_per_s, metrics.max_concurrent_requests)


def _vllms_writer():
    """The statements of vLLM's `main_async` that write the result file, as a function of
    (args, file_name, result_json): found in its source, so a change of theirs shows here."""
    source = textwrap.dedent(inspect.getsource(serve.main_async))
    start = source.index("    # Save to file\n")
    end = source.index("save_to_pytorch_benchmark_format(args, result_json, file_name)", start)
    block = textwrap.dedent(source[start:source.index("\n", end)])
    namespace = {"json": json, "save_to_pytorch_benchmark_format": lambda *a: None}
    exec("def write(args, file_name, result_json):\n" + textwrap.indent(block, "    "), namespace)
    return namespace["write"]


def test_save_and_append_result_write_the_bytes_vllm_writes(tmp_path):
    write = _vllms_writer()
    docs = [{"date": "d1", "completed": 3, "x": [1.5, None]}, {"date": "d2", "completed": 4, "é": "ü"}, {"n": 1}]
    for append in (False, True):
        theirs, ours = tmp_path / f"theirs-{append}.json", tmp_path / f"ours-{append}.json"
        args = argparse.Namespace(save_result=True, append_result=append)
        for doc in docs:
            write(args, str(theirs), doc)
            write_result(ours, doc, append=append)
        assert ours.read_bytes() == theirs.read_bytes()
