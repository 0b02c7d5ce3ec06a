"""Does the request driver scale with rows? Prints, against the targets of docs/reliability.md:

1. synth throughput on 200,000 rows vs 80 rows (target: within 10%). What is measured is
   the driver and the sink (plan -> drive -> wav + results row), so the engine is a fast
   stand-in inside this script: every request yields 0.2 s of audio after 2 ms. With
   `--real` the real engine (omni-tiny, `cpu` profile) runs 80 rows and `--real-rows` rows
   for comparison, at a size that fits this machine.
2. driver memory growth over 5,000 rows (RSS after minus before, target < 50 MB).
3. `omni bench -n 1000000 -c 8` with the same stand-in: seconds until the first request is
   submitted, and from the first Ctrl-C (SIGINT) to exit 130 (target: within the 5 s grace).

    python scripts/bench_driver_scale.py                 # ~5 min on a loaded 2-core machine
    python scripts/bench_driver_scale.py --rows 20000    # quicker
    python scripts/bench_driver_scale.py --real --real-rows 400

OUT folders go in --tmp (default /dev/shm where it exists: the disk's fsyncs are not the
driver's cost) and are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from omnicli.datasets import demo_manifest_path
from omnicli.engine.request import AudioChunk, EngineStats, RequestInfo
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.run import SynthRun

SR = 8000


class StandIn:
    """The engine interface, answering at once: 2 chunks of 0.1 s per request, 1 ms apart."""

    sample_rate = SR
    model_name, device, startup_seconds = "stand-in", "cpu", 0.0

    async def generate(self, request):
        for i in range(2):
            await asyncio.sleep(0.001)
            last = i == 1
            yield AudioChunk(
                np.full(SR // 10, 0.1, np.float32),
                last,
                time.perf_counter(),
                RequestInfo(finish_reason="stop") if last else None,
            )

    def stats(self) -> EngineStats:
        return EngineStats()

    async def close(self) -> None:
        pass


def text_manifest(folder: Path, rows: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "meta.lst"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            f.write(f"r{i:07d}|||Sentence number {i}.\n")
    return path


def synth(engine, rows, out: Path, concurrency: int, resolved) -> tuple[float, float, float]:
    """(audio seconds per wall second, per CPU second of this process, RSS growth in MB) of
    one SynthRun over `rows`. The CPU-second rate is what other jobs on the machine do not
    move: the driver's and the sink's own work per row."""
    gc.collect()
    before = psutil.Process().memory_info().rss
    run = SynthRun(engine, out, resolved=resolved, concurrency=concurrency)
    cpu = time.process_time()
    asyncio.run(run.run(rows))
    cpu = time.process_time() - cpu
    audio = sum(r.audio_seconds for r in run.results)
    gc.collect()
    grown = (psutil.Process().memory_info().rss - before) / 2**20
    assert len(run.results) == len(rows) and not run.left_pending, "every row finishes"
    return audio / run.wall_seconds, audio / cpu, grown


def stand_in_figures(base: Path, rows: int, concurrency: int) -> None:
    resolved = load_profile("cpu")
    small = read_manifest(text_manifest(base / "m80", 80)).rows
    big = read_manifest(text_manifest(base / "mbig", rows)).rows
    mem = read_manifest(text_manifest(base / "m5000", 5000)).rows
    rates, cpu_rates = [], []
    for i in range(5):  # short: the median of a few runs, spread around the long one
        rate, cpu_rate, _ = synth(StandIn(), small, base / f"out80-{i}", concurrency, resolved)
        rates.append(rate)
        cpu_rates.append(cpu_rate)
        if i == 1:
            big_rate, big_cpu_rate, _ = synth(StandIn(), big, base / "outbig", concurrency, resolved)
            shutil.rmtree(base / "outbig")
    _, _, grown = synth(StandIn(), mem, base / "out5000", concurrency, resolved)
    small_rate, small_cpu_rate = statistics.median(rates), statistics.median(cpu_rates)
    print(
        f"1. synth -c {concurrency}, stand-in engine: 80 rows {small_rate:.1f} audio-s/s (runs "
        f"{min(rates):.1f}-{max(rates):.1f}), "
        f"{rows:,} rows {big_rate:.1f} audio-s/s: {big_rate / small_rate:.2f} of the 80-row rate (target >= 0.90)"
    )
    print(
        f"   per CPU second of the driver's process: 80 rows {small_cpu_rate:.1f} audio-s (runs "
        f"{min(cpu_rates):.1f}-{max(cpu_rates):.1f}), "
        f"{rows:,} rows {big_cpu_rate:.1f}: {big_cpu_rate / small_cpu_rate:.2f} (what the machine's other load does "
        "not move)"
    )
    print(f"2. driver memory over 5,000 rows: {grown:+.1f} MB RSS (target < 50 MB)")


def real_figures(base: Path, rows: int, concurrency: int) -> None:
    from omnicli.engine.backends import start_engine

    demo = read_manifest(demo_manifest_path())
    lines = []
    for i in range(max(rows, 80)):
        row = demo.rows[i % len(demo.rows)]
        lines.append(f"x{i:06d}|{row.prompt_text}|{row.prompt_wav}|{row.text}\n")
    base.mkdir(parents=True, exist_ok=True)
    (base / "real.lst").write_text("".join(lines))
    every = read_manifest(base / "real.lst", allow_outside_paths=True).rows
    resolved = load_profile("cpu", overrides=["talker.max_new_tokens=60"])

    loop = asyncio.new_event_loop()
    engine = loop.run_until_complete(start_engine(resolved))
    try:
        figures = []
        for n in (80, rows):
            run = SynthRun(engine, base / f"real-{n}", resolved=resolved, concurrency=concurrency)
            loop.run_until_complete(run.run(every[:n]))
            figures.append(sum(r.audio_seconds for r in run.results) / run.wall_seconds)
        print(
            f"1b. synth -c {concurrency}, real engine (omni-tiny, cpu, 60 tokens): 80 rows {figures[0]:.2f} audio-s/s, "
            f"{rows} rows {figures[1]:.2f} audio-s/s: {figures[1] / figures[0]:.2f}"
        )
    finally:
        loop.run_until_complete(engine.close())
        loop.close()


BENCH = """
import asyncio, sys, time
import numpy as np
import omnicli.benchmark.entrypoint as bench_entry
from omnicli.cli import app
from omnicli.engine.request import AudioChunk, EngineStats, RequestInfo

class StandIn:
    sample_rate, model_name, device = 8000, "stand-in", "cpu"
    first = True
    async def generate(self, req):
        if self.first:
            self.first = False
            print("first request", flush=True)
        for i in range(2):
            await asyncio.sleep(0.001)
            info = RequestInfo(finish_reason="stop") if i == 1 else None
            yield AudioChunk(np.full(800, 0.1, np.float32), i == 1, time.perf_counter(), info)
    def stats(self):
        return EngineStats()
    def write_run_files(self, run_dir):
        return []
    async def close(self):
        pass

async def start(resolved):
    return StandIn()

bench_entry.start_engine = start
app(["bench", "-n", sys.argv[1], "-c", "8"], prog_name="omni")
"""


def bench_ctrl_c(prompts: int) -> None:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", BENCH, str(prompts)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    first = None
    for line in proc.stdout:
        if line.startswith("first request"):
            first = time.perf_counter() - t0
            break
    time.sleep(3.0)  # a few thousand requests in
    rss = psutil.Process(proc.pid).memory_info().rss / 2**20
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    _, status, _ = os.wait4(proc.pid, 0)
    took = time.perf_counter() - sent
    code = os.waitstatus_to_exitcode(status)
    print(
        f"3. omni bench -n {prompts:,} -c 8 (stand-in engine): first request {first:.1f} s after launch (the process "
        "start included), "
        f"RSS {rss:.0f} MB while running; first Ctrl-C -> exit {code} in {took:.2f} s (target: 130 within the 5 s "
        "grace)"
    )
    if code != 130:
        print(rest[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--concurrency", "-c", type=int, default=8)
    parser.add_argument("--bench-prompts", type=int, default=1_000_000)
    parser.add_argument("--real", action="store_true", help="also run the real engine on 80 and --real-rows rows")
    parser.add_argument("--real-rows", type=int, default=400)
    parser.add_argument("--tmp", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs")
    base = Path(tempfile.mkdtemp(prefix="omni-driver-", dir=args.tmp))
    try:
        stand_in_figures(base, args.rows, args.concurrency)
        if args.real:
            real_figures(base / "real", args.real_rows, args.concurrency)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    bench_ctrl_c(args.bench_prompts)


if __name__ == "__main__":
    main()
