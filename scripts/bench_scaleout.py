"""Scaling of `omni bench --ray` with the number of engines, measured in one run.

Runs the real `omni bench --ray` once per engine count on the same load (one
Ray cluster for all of them), then prints each run's total and per-engine
audio throughput and the ratio of each total to the first:

    python scripts/bench_scaleout.py                                  # 1 then 2 engines, demo set
    python scripts/bench_scaleout.py --engines 1,2,4 --ray-address auto -- -n 64 -c 8 -p default
    python scripts/bench_scaleout.py --out results/ -- -n 16 -c 4 --warmup 4 -p cpu

Everything after `--` goes to `omni bench` unchanged (each engine gets that
whole load). Ideal scaling is a ratio equal to the engine count; on a machine
with fewer cores than the engines need, expect much less. Exit status: 0, or
the first non-zero `omni bench` exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

DEFAULT_BENCH = ["-n", "16", "-c", "4", "--warmup", "4", "--max-new-tokens", "60", "--rounds", "2", "-p", "cpu"]


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    bench_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="1,2", help="engine counts to run, in order (default 1,2)")
    parser.add_argument("--cpus-per-engine", type=float, default=1.0)
    parser.add_argument("--gpus-per-engine", type=float, default=0.0)
    parser.add_argument("--ray-address", default=None, help="join this cluster (auto|HOST:PORT); default: start a local one")
    parser.add_argument("--out", type=Path, default=None, help="keep the result files here (default: a temporary folder)")
    args = parser.parse_args(argv)
    args.engine_counts = [int(n) for n in args.engines.split(",") if n.strip()]
    return args, bench_args or list(DEFAULT_BENCH)


def run_bench(engines: int, args: argparse.Namespace, bench_args: list[str], out: Path) -> tuple[int, dict | None]:
    from omnicli.cli import app

    name = f"engines{engines}.json"
    argv = ["bench", "--ray", "--engines", str(engines), "--cpus-per-engine", f"{args.cpus_per_engine:g}",
            "--gpus-per-engine", f"{args.gpus_per_engine:g}", *bench_args, "--result-dir", str(out), "--result-filename", name]
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
    rows, status = [], 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            for engines in args.engine_counts:
                code, document = run_bench(engines, args, bench_args, out)
                status = status or code
                for run in (document or {}).get("runs", []):
                    rows.append((engines, run))
    finally:
        ray.shutdown()
    print(f"\nscaling on {os.cpu_count()} CPU(s); omni bench {' '.join(bench_args)}")
    print(f"{'engines':>7} {'pass':>10} {'audio s/s':>10} {'per engine':>24} {'p50 TTFP ms':>12} {'ratio':>6}")
    base: dict[str, float] = {}
    for engines, run in rows:
        shape = run["label"].split("/")[-1]
        total = run["audio_throughput"]
        base.setdefault(shape, total)
        per = ", ".join(f"{e['audio_throughput']:.2f}" if e.get("audio_throughput") is not None else "failed"
                        for e in run["per_engine"])
        ratio = total / base[shape] if base[shape] else float("nan")
        ttfp = run.get("p50_audio_ttfp_ms")
        print(f"{engines:>7} {shape:>10} {total:>10.3f} {per:>24} {ttfp if ttfp is None else round(ttfp, 1)!s:>12} {ratio:>6.2f}")
    return status


if __name__ == "__main__":  # vLLM spawns workers that re-import this file: the guard is required
    sys.exit(main(sys.argv[1:]))
