"""What the tools that read `vllm bench serve` result files do with one, reproduced.

Each function is written from reading the tool's code (vLLM 0.33 `vllm bench
sweep`, vLLM's CI scripts convert-results-json-to-markdown.py and
compare-json-results.py, vLLM-Omni's perf CI and benchmarks/tts): it reads the
same keys, with the same types, and fails where the tool would fail. The tools
themselves are not imported (their CI scripts are not packaged; see
docs/bench.md for what each real one did with omni's files).
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pandas as pd

# --- vLLM 0.33 `vllm bench sweep serve` and `vllm bench sweep plot` ---------------------------

# What the sweep appends to every benchmark command it runs.
SWEEP_BENCH_ARGS = ["--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result"]


def sweep_reads_run(path: Path, bench_overrides: dict, run_number: int) -> dict:
    """sweep/serve.py run_benchmark: `json.load` of the whole --result-filename file, then the
    run's number and parameters on top; it writes the list of runs to summary.json."""
    with path.open("rb") as f:
        run_data = json.load(f)
    run_data["run_number"] = run_number
    run_data.update(bench_overrides)
    return run_data


def sweep_plot_frame(
    summary_json: Path, var_x: str = "total_token_throughput", var_y: str = "median_ttft_ms"
) -> pd.DataFrame:
    """sweep/plot.py: `json.load` of each summary.json (a list), "inf"/"-inf"/"nan" strings to floats,
    a DataFrame; a missing --var-x/--var-y column is an error (its defaults are these two)."""
    with summary_json.open("rb") as f:
        records = json.load(f)
    records = [
        {k: float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v for k, v in r.items()}
        for r in records
    ]
    df = pd.DataFrame.from_records(records)
    for var in (var_x, var_y):
        if var not in df.columns:
            raise ValueError(f"Cannot find {var!r} in the results")
    return df


# --- vLLM CI: .buildkite/performance-benchmarks/scripts --------------------------------------

SERVING_COLUMNS = {  # convert-results-json-to-markdown.py's serving_column_mapping
    "test_name": "Test name", "model_id": "Model", "dataset_name": "Dataset Name", "input_len": "Input Len",
    "output_len": "Output Len", "tp_size": "TP Size", "pp_size": "PP Size", "dtype": "dtype", "gpu_type": "GPU",
    "completed": "# of req.", "qps": "qps", "max_concurrency": "# of max concurrency.",
    "request_throughput": "Tput (req/s)", "total_token_throughput": "Total Token Tput (tok/s)",
    "output_throughput": "Output Tput (tok/s)", "mean_ttft_ms": "Mean TTFT (ms)", "median_ttft_ms": "Median TTFT (ms)",
    "p99_ttft_ms": "P99 TTFT (ms)", "std_ttft_ms": "STD TTFT (ms)", "mean_tpot_ms": "Mean TPOT (ms)",
    "median_tpot_ms": "Median", "p99_tpot_ms": "P99", "std_tpot_ms": "STD TPOT (ms)", "mean_itl_ms": "Mean ITL (ms)",
    "median_itl_ms": "Median ITL (ms)", "p99_itl_ms": "P99 ITL (ms)",
}


def _client_args(command: str) -> dict:
    toks, args, i = shlex.split(command), {}, 2
    while i < len(toks):
        if toks[i].startswith("--") and i + 1 < len(toks) and not toks[i + 1].startswith("--"):
            args[toks[i]] = toks[i + 1]
            i += 2
        else:
            i += 1
    return args


def convert_results_to_json(results_folder: Path) -> list[dict]:
    """convert-results-json-to-markdown.py on a folder: each `*.json` read whole with json.loads; a
    name holding "serving" needs its `.commands` file (the CI writes server/client commands and
    gpu_type there); --request-rate of the client command becomes `qps`; the serving columns are
    renamed; "GPU" is split on newlines. Returns what it writes to benchmark_results.json."""
    rows = []
    for test_file in sorted(results_folder.glob("*.json")):
        raw = json.loads(test_file.read_text())
        if "serving" not in str(test_file):
            continue
        command = json.loads(test_file.with_suffix(".commands").read_text())
        client = _client_args(command["client_command"])
        if "--request-rate" in client:
            raw["qps"] = client["--request-rate"]
        raw.update(command)
        raw["test_name"] = test_file.stem
        rows.append(raw)
    df = pd.DataFrame(rows)
    df = df[[c for c in SERVING_COLUMNS if c in df.columns]].rename(columns=SERVING_COLUMNS)
    df = df.sort_values(by="Test name")
    df["GPU"] = df["GPU"].apply(lambda x: "{}x{}".format(len(x.split("\n")), x.split("\n")[0]))
    return df.to_dict(orient="records")


def compare_json_results(files: list[Path], latency: str = "p99") -> dict[str, pd.DataFrame]:
    """compare-json-results.py: for each compared column (`Output Tput (tok/s)`, `P99 TTFT (ms)`,
    `P99` by default), pd.read_json of every file, rows without `P99` dropped, indexed by the info
    columns all files share, one column per file and `Ratio 1 vs N` (base / current for
    latencies, current / base for throughput; NaN where the base is 0). A missing column is
    the KeyError the script stops with."""
    info_cols = [
        "Model",
        "Dataset Name",
        "Input Len",
        "Output Len",
        "TP Size",
        "PP Size",
        "# of max concurrency.",
        "qps",
    ]
    data_cols = (
        ["Output Tput (tok/s)", "Median TTFT (ms)", "Median"]
        if latency == "median"
        else ["Output Tput (tok/s)", "P99 TTFT (ms)", "P99"]
    )
    frames = [pd.read_json(f, orient="records") for f in files]
    key_cols = [c for c in info_cols if all(c in df.columns for df in frames)]
    out = {}
    for column in data_cols:
        series = []
        for f, df in zip(files, frames):
            df = df.dropna(subset=["P99"], ignore_index=True) if "P99" in df.columns else df
            s = df.set_index(key_cols)[column]
            s.name = str(f)
            series.append(s)
        table = pd.concat(series, axis=1)
        for n, current in enumerate(series[1:], start=2):
            base = series[0]
            ratio = base / current if ("P99" in column or "Median" in column) else current / base
            table[f"Ratio 1 vs {n}"] = ratio.mask(base == 0)
        out[column] = table
    return out


# --- vLLM-Omni perf CI: tests/dfx/conftest.py run_benchmark + run_benchmark.py assert_result ---

def omni_ci_command(params: dict, *, host: str, port: int, result_dir: str, result_filename: str,
                    concurrency: int, num_prompt: int) -> list[str]:
    """The `vllm bench serve --omni` arguments vLLM-Omni's perf CI builds from one benchmark_params
    entry of its test JSON, for a concurrency step (without the leading `vllm bench serve --omni`)."""
    excluded = {"request_rate", "baseline", "num_prompts", "max_concurrency", "num_warmups", "task", "enabled",
                "eval_phase", "trust_remote_code", "expected_duplex_audio_turns_per_session"}
    args = ["--host", host, "--port", str(port)]
    for key, value in params.items():
        if key in excluded or value is None:
            continue
        flag = f"--{key.replace('_', '-')}"
        if isinstance(value, bool):
            if value:
                args.append(flag)
        elif isinstance(value, dict):
            args += [flag, json.dumps(value, ensure_ascii=False, separators=(",", ":"))]
        else:
            args += [flag, str(value)]
    args += ["--max-concurrency", str(concurrency), "--num-prompts", str(num_prompt), "--request-rate", "inf"]
    return args + [
        "--num-warmups",
        "2",
        "--save-result",
        "--result-dir",
        result_dir,
        "--result-filename",
        result_filename,
    ]


def omni_ci_check(result_path: Path, params: dict, *, num_prompt: int, hardware: str, sweep_index: int) -> dict:
    """The CI's reading of one result: json.load of the whole file, `completed == num_prompts`, the
    TPOT sanity check when a TPOT baseline is set, then each baseline of the hardware for this
    sweep step: a metric named `*throughput*` must be >= it, any other <= it. Returns the thresholds."""
    result = json.loads(result_path.read_text(encoding="utf-8"))
    assert result["completed"] == num_prompt, "Request failures exist"
    thresholds = {metric: values[sweep_index] for metric, values in params["baseline"][hardware].items()}
    if "mean_tpot_ms" in thresholds:
        samples, mean = result.get("num_tpot_samples"), result.get("mean_tpot_ms")
        assert isinstance(samples, int) and not isinstance(samples, bool) and samples > 0
        assert isinstance(mean, int | float) and math.isfinite(mean)
    for metric, baseline in thresholds.items():
        current = result[metric]
        if "throughput" in metric:
            assert current >= baseline, f"{metric}: {current} < {baseline}"
        else:
            assert current <= baseline, f"{metric}: {current} > {baseline}"
    return thresholds


# --- vLLM-Omni benchmarks/tts: bench_tts.py and plot_results.py --------------------------------

def bench_tts_row(result_path: Path, task: str, concurrency: int) -> str:
    """bench_tts.py: json.loads of the whole --result-filename file, its task and concurrency added,
    and its summary table row (`f"{v:.3f}"` unless NaN: a None crashes it)."""
    r = json.loads(result_path.read_text(encoding="utf-8"))
    r["_task"], r["_concurrency"] = task, concurrency

    def fmt(v: float, digits: int = 3) -> str:
        return f"{v:.{digits}f}" if not math.isnan(v) else "  n/a"

    nan = float("nan")
    return (f"{task:<16} {'-':<12} {concurrency:>11} {fmt(r.get('mean_audio_rtf', nan)):>10} "
            f"{fmt(r.get('mean_audio_ttfp_ms', nan), 0):>10} {fmt(r.get('audio_throughput', nan)):>12} "
            f"{fmt(r.get('seed_tts_mean_wer', nan)):>7}")


def plot_results_values(paths: list[Path]) -> dict[str, list[float]]:
    """plot_results.py: each file read whole (a dict or a list of them), the four plotted metrics
    and its table's WER per record as floats (None or missing: NaN)."""
    records = []
    for p in paths:
        raw = json.loads(Path(p).read_text(encoding="utf-8"))
        records += raw if isinstance(raw, list) else [raw]

    def get(record: dict, key: str) -> float:
        v = record.get(key, float("nan"))
        return float("nan") if v is None else float(v)

    keys = ("mean_audio_ttfp_ms", "mean_e2el_ms", "mean_audio_rtf", "audio_throughput", "seed_tts_content_error_mean")
    return {k: [get(r, k) for r in records] for k in keys}
