"""Real-size Qwen3-TTS 0.6B (random weights) on CPU: today's preset against the CPU-stage preset.

    python scripts/bench_real_size.py [--rounds 1] [--baseline-commit a5c4cc5] [--baseline-code DIR]
        [--variants old,new] [--cache-dir DIR] [--out DIR] [--tokens 200]

Builds or reuses the real-size Base checkpoint with a stopping talker (mean 25 frames) under
CACHE_DIR/models/ (omnicli.vllm_omni.checkpoints.real_size_checkpoint; $OMNI_CACHE_DIR by default), then
per round and variant runs, one engine at a time, `omni synth` of the first 3 demo rows and
`omni bench -c 1,2 -n 4 --save-result`, both `--profile qwen3-tts` with the checkpoint:

- old: the code at --baseline-commit (a `git worktree` made at --baseline-code when missing), its
  preset as shipped: every stage process with one thread per core, bfloat16 talker, float32 codec, a
  worker process per stage;
- new: this checkout: dtype by the CPU's native bf16, the cores split between the stages, the stage
  worker in its stage process.

The variants alternate within a round (old, new; the next round new, old) so load drift hits both.
Printed per variant: engine start time, peak summed PSS of the command's process tree, synth
audio-s/s (ok rows), bench audio-s/s, mean RTF and mean first audio at c=1 and c=2, and CPU seconds
per audio second of each stage's processes (talker stage: talker forward and code predictor
together, not separable without a sampling profiler; codec stage), then new/old ratios (an
interval from 3 rounds a side), the CPU flags and the load average. The machine's other load is not
controlled: say so beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from omnicli.benchmark.compare import ratio_summary
from omnicli.runtime.cpu_dtype import probe_bf16
from omnicli.runtime.pss import tree_pss
from omnicli.vllm_omni.checkpoints import real_size_checkpoint

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "omnicli" / "data" / "demo"
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


class TreeWatch:
    """Samples a command's process tree every 0.5 s: peak summed PSS, and CPU seconds per stage.

    The stage processes are the spawned children of the command, each counted with its own workers;
    vLLM titles them `VLLM::StageEngineCoreProc_stage0_...` once started. A stage whose title was never
    seen is named by its peak PSS (the talker is the larger: 3-3.5 GB against the codec's 1-2 GB)."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0
        self.cpu: dict[int, float] = {}  # pid -> CPU seconds
        self.top: dict[int, int] = {}  # pid -> the command's child it descends from
        self.top_pss: dict[int, int] = {}  # a spawned child -> its peak PSS
        self.titled: dict[int, str] = {}  # a spawned child -> its stage, from its process title
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_pss(self.pid)[1])
            try:
                children = psutil.Process(self.pid).children()
            except psutil.Error:
                children = []
            for child in children:
                try:
                    title = " ".join(child.cmdline())
                    if "spawn_main" not in title and "StageEngineCoreProc" not in title:
                        continue
                    for stage, name in (("_stage0_", "talker_stage"), ("_stage1_", "codec_stage")):
                        if stage in title:
                            self.titled[child.pid] = name
                    procs = [child, *child.children(recursive=True)]
                    self.top_pss[child.pid] = max(self.top_pss.get(child.pid, 0), tree_pss(child.pid)[1])
                except psutil.Error:
                    continue
                for p in procs:
                    try:
                        t = p.cpu_times()
                    except psutil.Error:
                        continue
                    self.cpu[p.pid] = t.user + t.system
                    self.top[p.pid] = child.pid
            self._stop.wait(0.5)

    def stop(self) -> dict[str, float]:
        """CPU seconds of the talker stage and of the codec stage (workers included)."""
        self._stop.set()
        self._thread.join(5)
        ranked = sorted(self.top_pss, key=self.top_pss.__getitem__, reverse=True)
        names = {**dict(zip(ranked, ("talker_stage", "codec_stage"), strict=False)), **self.titled}
        totals: dict[str, float] = {}
        for pid, seconds in self.cpu.items():
            name = names.get(self.top[pid], "other")
            totals[name] = totals.get(name, 0.0) + seconds
        return totals


def run_command(args: list[str], code: Path, log: Path) -> tuple[int, str, int, dict[str, float], float]:
    """(exit status, stderr, peak summed PSS, CPU seconds by stage, wall seconds) of `python -m omnicli ARGS`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "omnicli", *args], cwd=code, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
        watch = TreeWatch(proc.pid)
        rc = proc.wait()
    cpu = watch.stop()
    return rc, log.read_text(errors="replace"), watch.peak, cpu, time.perf_counter() - t0


def _started_in(stderr: str) -> float | None:
    for line in stderr.splitlines():
        if line.startswith("engine ready in "):
            return float(line.split()[3].rstrip("s"))
    return None


def one_variant(name: str, code: Path, ckpt: Path, out: Path, tokens: int) -> dict:
    """Synth of 3 demo rows, then bench c=1,2 n=4, with `code`'s omnicli; the figures of both."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [s for s in (DEMO / "meta.lst").read_text().splitlines() if s and not s.startswith("#")][:3]
    manifest = out / "three.lst"
    manifest.write_text("".join(f"{u}|{pt}|{DEMO / w}|{t}\n" for u, pt, w, t in (r.split("|") for r in rows)))
    common = ["--profile", "qwen3-tts", "--set", f"model_path={ckpt}", "--max-new-tokens", str(tokens),
              "--allow-outside-paths"]
    figures: dict = {"variant": name, "load_before": os.getloadavg()[0]}
    rc, err, peak, cpu, _ = run_command(["synth", str(manifest), "--out", str(out / "synth"), *common], code,
                                        out / "synth.log")
    summary_file = out / "synth" / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    run = summary.get("this_run", {})
    audio = run.get("audio_seconds") or 0.0
    figures.update(synth_rc=rc, start_s=_started_in(err), synth_peak_pss_gib=peak / 2**30,
                   synth_audio_s_per_s=run.get("audio_throughput"), synth_ok=run.get("ok"),
                   synth_audio_s=audio, synth_failed_audio_s=run.get("failed_audio_seconds"),
                   cpu_stages_line=next((s for s in err.splitlines() if s.startswith("CPU stages:")), None),
                   **{f"synth_{k}_cpu_s_per_audio_s": (v / audio if audio else None) for k, v in cpu.items()})
    rc, err, peak, cpu, _ = run_command(
        ["bench", str(manifest), "-c", "1,2", "-n", "4", "--save-result", "--result-dir", str(out / "bench"),
         "--disable-tqdm", *common], code, out / "bench.log")
    figures.update(bench_rc=rc, bench_peak_pss_gib=peak / 2**30)
    bench_audio = 0.0
    for path in sorted((out / "bench").glob("*.json")):
        result = json.loads(path.read_text())
        c = result.get("max_concurrency")
        if c not in (1, 2) or "audio_throughput" not in result:
            continue
        bench_audio += result.get("total_audio_duration_s") or 0.0
        figures.update({f"c{c}_audio_s_per_s": result["audio_throughput"], f"c{c}_rtf": result.get("mean_audio_rtf"),
                        f"c{c}_first_audio_ms": result.get("mean_audio_ttfp_ms")})
    figures.update({f"bench_{k}_cpu_s_per_audio_s": (v / bench_audio if bench_audio else None) for k, v in cpu.items()})
    figures["load_after"] = os.getloadavg()[0]
    return figures


def baseline_code(path: Path, commit: str) -> Path:
    if not (path / "omnicli").is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in FLAGS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default="old,new")
    parser.add_argument("--baseline-commit", default="a5c4cc5")
    parser.add_argument("--baseline-code", type=Path, default=Path("/tmp/omni-baseline"))
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("OMNI_CACHE_DIR", REPO / ".cache" / "omni-test")))
    parser.add_argument("--out", type=Path, default=Path("/tmp/omni-bench-real-size"))
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    t0 = time.perf_counter()
    ckpt = real_size_checkpoint(args.cache_dir)
    print(f"checkpoint {ckpt} ready in {time.perf_counter() - t0:.1f} s")
    print(f"CPU: {cpu_flags()}; torch/oneDNN: {probe_bf16().evidence}; {os.cpu_count()} cores")
    names = args.variants.split(",")
    codes = {"old": lambda: baseline_code(args.baseline_code, args.baseline_commit), "new": lambda: REPO}
    results: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            figures = one_variant(name, codes[name](), ckpt, args.out / f"r{r}-{name}", args.tokens)
            results[name].append(figures)
            print(json.dumps(figures), flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    keys = [k for k in results[names[-1]][0] if isinstance(results[names[-1]][0][k], (int, float))]
    print(f"\nmedian over {args.rounds} round(s) (load average: see load_before/load_after; a shared machine)")
    for key in keys:
        cells = []
        for name in names:
            values = [f[key] for f in results[name] if isinstance(f.get(key), (int, float))]
            cells.append(f"{name} {statistics.median(values):.3f}" if values else f"{name} -")
        line = f"  {key}: " + ", ".join(cells)
        if set(names) == {"old", "new"}:
            new = [f[key] for f in results["new"] if f.get(key)]
            old = [f[key] for f in results["old"] if f.get(key)]
            if new and old:
                line += f"; new/old {ratio_summary(new, old)}"
        print(line)
    print(f"results: {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
