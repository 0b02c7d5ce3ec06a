"""Scaling of `omni bench --ray` with the number of engines, measured in one run.

Runs the real `omni bench --ray` for each engine count on the same load (one
Ray cluster for all of them), in alternating rounds (1 engine, 2 engines, 1,
2, ... `--rounds` each) so that load drifting on the machine falls on every
count alike; then prints per engine count and load shape the median total
audio throughput over the rounds, its min-max, the load average during those
rounds, the median per-engine throughputs, and the ratio of each count's
median to the first count's with its bootstrap 90% interval
(omnicli/benchmark/compare.py; "no difference measured" when it spans 1.0):

    python scripts/bench_scaleout.py                                  # 1 then 2 engines, 3 rounds each
    python scripts/bench_scaleout.py --engines 1,2,4 --rounds 5 --ray-address auto -- -n 64 -c 8 -p default
    python scripts/bench_scaleout.py --out results/ -- -n 16 -c 4 --warmup 4 -p cpu

Everything after `--` goes to `omni bench` unchanged (each engine gets that
whole load; keep its own `--rounds` at 1: the rounds here are the script's).
Each round is one `omni bench --ray` invocation, so its engines start afresh
(start-up is outside the measured pass; `--warmup` runs on every fresh set):
the engine sets of two counts are not held at once. Ideal scaling is a ratio
equal to the engine count; on a machine with fewer cores than the engines
need, expect much less. Exit status: 0, or the first non-zero `omni bench`
exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from omnicli.benchmark.compare import run_interleaved

DEFAULT_BENCH = ["-n", "16", "-c", "4", "--warmup", "4", "--max-new-tokens", "60", "-p", "cpu"]


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    bench_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="1,2", help="engine counts to run, in order (default 1,2)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per engine count (default 3; "
                        "an interval needs 3 or more)")
    parser.add_argument("--cpus-per-engine", type=float, default=1.0)
    parser.add_argument("--gpus-per-engine", type=float, default=0.0)
    parser.add_argument(
        "--ray-address", default=None, help="join this cluster (auto|HOST:PORT); default: start a local one"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the result files here (default: a temporary folder)"
    )
    args = parser.parse_args(argv)
    args.engine_counts = list(dict.fromkeys(int(n) for n in args.engines.split(",") if n.strip()))
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    return args, bench_args or list(DEFAULT_BENCH)


def run_bench(
    engines: int, args: argparse.Namespace, bench_args: list[str], out: Path, round_: int
) -> tuple[int, dict | None]:
    from omnicli.cli import app

    name = f"engines{engines}-round{round_ + 1}.json"
    argv = [
        "bench",
        "--ray",
        "--engines",
        str(engines),
        "--cpus-per-engine",
        f"{args.cpus_per_engine:g}",
        "--gpus-per-engine",
        f"{args.gpus_per_engine:g}",
        *bench_args,
        "--result-dir",
        str(out),
        "--result-filename",
        name,
    ]
    if args.ray_address:
        argv += ["--ray-address", args.ray_address]
    try:
        app(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    path = out / name
    return code, json.loads(path.read_text()) if path.is_file() else None


def main(argv: list[str]) -> int:
    args, bench_args = parse_args(argv)
    import ray

    # One cluster for every engine count (the commands join it), so each run measures engines, not start-up.
    if args.ray_address:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    else:
        need = int(max(args.engine_counts) * args.cpus_per_engine + 0.999) + 1
        ray.init(num_cpus=max(os.cpu_count() or 1, need), include_dashboard=False, log_to_driver=False)
    documents: dict[int, list[dict]] = {n: [] for n in args.engine_counts}  # each count's result files, by round
    status = 0

    def phase(engines: int):
        def run_round() -> float:
            nonlocal status
            code, document = run_bench(engines, args, bench_args, out, len(documents[engines]))
            status = status or code
            documents[engines].append(document or {"runs": []})
            runs = documents[engines][-1]["runs"]
            return runs[0]["audio_throughput"] if runs else 0.0
        return run_round

    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            rounds = run_interleaved({f"{n} engine(s)": phase(n) for n in args.engine_counts}, args.rounds)
    finally:
        ray.shutdown()
    print(f"\nscaling on {os.cpu_count()} CPU(s), {args.rounds} alternating round(s) per engine count; "
          f"omni bench {' '.join(bench_args)}")
    for line in summary_lines(args.engine_counts, documents, rounds):
        print(line)
    return status


def summary_lines(counts: list[int], documents: dict[int, list[dict]], rounds: dict) -> list[str]:
    """Per load shape and engine count: median audio-s/s over rounds, min-max, load, per-engine medians, ratio."""
    from omnicli.benchmark.compare import PhaseRounds, ratio_summary

    shapes = list(
        dict.fromkeys(run["label"].split("/")[-1] for docs in documents.values() for d in docs for run in d["runs"])
    )
    lines = []
    for shape in shapes:
        base: PhaseRounds | None = None
        for n in counts:
            runs = [next((r for r in d["runs"] if r["label"].endswith("/" + shape)), None) for d in documents[n]]
            done = [r for r in runs if r is not None]
            phase = PhaseRounds(
                f"{n} engine(s) {shape}", [r["audio_throughput"] for r in done], rounds[f"{n} engine(s)"].load
            )
            if not done:
                lines.append(f"{phase.name}: no completed round")
                continue
            per_engine = [[e.get("audio_throughput") for e in r["per_engine"]] for r in done]
            engine_medians = ", ".join(
                f"{statistics.median(v):.2f}"
                if (v := [x[i] for x in per_engine if i < len(x) and x[i] is not None])
                else "failed"
                for i in range(max(len(x) for x in per_engine))
            )
            ttfp = [r["p50_audio_ttfp_ms"] for r in done if r.get("p50_audio_ttfp_ms") is not None]
            ttfp_text = f"; p50 TTFP {statistics.median(ttfp):.1f} ms" if ttfp else ""
            lines.append(f"{phase.describe(' audio-s/s')}; per engine {engine_medians}{ttfp_text}")
            if base is None:
                base = phase
            elif base.values and min(base.values) > 0:
                lines.append(
                    f"  {n} engine(s) / {base.name.split(' ')[0]} engine(s): {ratio_summary(phase.values, base.values)}"
                )
    return lines


if __name__ == "__main__":  # vLLM spawns workers that re-import this file: the guard is required
    sys.exit(main(sys.argv[1:]))
