"""In-process vs the HTTP path on one Qwen3-TTS checkpoint, side by side in one run.

    python scripts/bench_vllm_omni_http.py CKPT_DIR [--rows 8] [--concurrency 1,4,8] [--rounds 3]
        [--tokens 150] [--stop-frames 25] [--seed S] [--profile qwen3-tts] [--port 8091] [--out DIR]

HTTP: vLLM-Omni's own server (`vllm-omni serve CKPT --omni --deploy-config OVERLAY`) driven by
its own client (`vllm-omni bench serve --omni --backend openai-audio-speech --dataset-name
seed-tts`). In-process: `omni`'s engine (OmniEngine over AsyncOmni) driven by `omni bench`'s
request driver (omnicli.benchmark.session.run_round). Both sides get the same deploy overlay
(built from --profile), the same rows (the demo Seed-TTS set, the first --rows rows in file order)
the same language (English) and the same talker cap (--tokens). Both stay up for the whole run; the rounds alternate
(HTTP, in-process, HTTP, ...; omnicli.benchmark.compare.run_interleaved) at each concurrency, so load drift hits
both alike.

When CKPT_DIR does not exist, a tiny random-weight Base checkpoint whose talker ends by codec EOS after about
--stop-frames frames is built there (build_tiny_qwen3_tts(stop_frames=...)): vLLM-Omni's server rejects a Base
request that ends by length, and a plain random talker never says EOS. Keep --tokens well above --stop-frames
(the lengths are geometric: P(reaching 150 at a mean of 25) is about 0.2%).

Per side and concurrency it prints the medians over rounds of audio-s/s, requests/s, mean and
p99 first-audio latency, then in-process/HTTP ratios with a bootstrap 90% interval ("no
difference measured" when it spans 1.0). Writes every round's figures to OUT/results.json.
If the server cannot start, it says where it failed (the server log's tail) and exits 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omnicli.benchmark.compare import ratio_summary, run_interleaved
from omnicli.benchmark.prompts import load_prompts
from omnicli.benchmark.session import run_round
from omnicli.driver import LoadShape
from omnicli.driver.records import audio_duration, audio_ttfp
from omnicli.profile import load_profile
from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts
from omnicli.vllm_omni.overlay import build_overlay, write_overlay
from omnicli.vllm_omni.shims import install_import_shims

FIGURES = ("audio_s_per_s", "requests_per_s", "mean_first_audio_ms", "p99_first_audio_ms")
SERVER_START_TIMEOUT_S = 900


def demo_rows(rows: int, root: Path) -> Path:
    """The first `rows` rows of the demo set in the Seed-TTS layout vLLM-Omni's client reads
    (ROOT/en/meta.lst, wavs relative to ROOT/en); our prompts load the same file."""
    from omnicli.benchmark.prompts import demo_manifest_path

    src = demo_manifest_path()
    lines = [ln for ln in src.read_text().splitlines() if ln.strip() and not ln.startswith("#")][:rows]
    dest = root / "en"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src.parent / "prompts", dest / "prompts", dirs_exist_ok=True)
    (dest / "meta.lst").write_text("\n".join(lines) + "\n")
    return dest / "meta.lst"


# ------------------------------------------------------------------ HTTP side


class Server:
    """vLLM-Omni's OpenAI-compatible server in its own process group."""

    def __init__(self, ckpt: Path, overlay: Path, port: int, log: Path):
        self.port, self.log = port, log
        cmd = [sys.executable, "-m", "vllm_omni.entrypoints.cli.main", "serve", str(ckpt), "--omni",
               "--deploy-config", str(overlay), "--port", str(port), "--host", "127.0.0.1"]
        # As the in-process engine runs (omnicli.vllm_omni.engine): spawned stages, no core pinning.
        env = {**os.environ, "VLLM_WORKER_MULTIPROC_METHOD": "spawn", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
        self.proc = subprocess.Popen(
            cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def wait_ready(self) -> float:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < SERVER_START_TIMEOUT_S:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode} while starting")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(2)
        raise RuntimeError(f"the server was not ready after {SERVER_START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


def http_round(
    ckpt: Path, dataset: Path, rows: int, concurrency: int, tokens: int, port: int, out: Path, seed: int | None = None,
) -> dict:
    """One pass of vLLM-Omni's own client; its saved result JSON reduced to our four figures."""
    name = f"http-c{concurrency}-{time.time_ns()}.json"
    cmd = [
        sys.executable,
        "-m",
        "vllm_omni.entrypoints.cli.main",
        "bench",
        "serve",
        "--omni",
        "--backend",
        "openai-audio-speech",
        "--dataset-name",
        "seed-tts",
        "--dataset-path",
        str(dataset.parent.parent),
        "--model",
        str(ckpt),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--endpoint",
        "/v1/audio/speech",
        "--num-prompts",
        str(rows),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--hf-output-len",
        str(tokens),
        "--disable-shuffle",
        "--percentile-metrics",
        "audio_ttfp",
        "--metric-percentiles",
        "99",
        "--save-result",
        "--result-dir",
        str(out),
        "--result-filename",
        name,
    ]
    if seed is not None:  # the speech endpoint's own `seed` field: every row seeded alike, on both sides
        cmd += ["--extra-body", json.dumps({"seed": seed})]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(
            f"vllm-omni bench serve failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    result = json.loads((out / name).read_text())
    if not result.get("completed"):
        raise RuntimeError(f"the server answered none of {rows} requests ({result.get('failed')} failed)")
    return {
        "audio_s_per_s": float(result["audio_throughput"]),
        "requests_per_s": float(result["request_throughput"]),
        "mean_first_audio_ms": float(result["mean_audio_ttfp_ms"]),
        "p99_first_audio_ms": float(result.get("p99_audio_ttfp_ms") or _percentile(result, "audio_ttfp_ms", 99)),
        "completed": int(result.get("completed", rows)),
        "audio_s": float(result["audio_throughput"]) * float(result["duration"]),
    }


def _percentile(result: dict, metric: str, p: float) -> float:
    for q, value in result.get(f"percentiles_{metric}") or []:
        if float(q) == p:
            return float(value)
    return float("nan")


# ------------------------------------------------------------------ in-process side


async def in_process_round(engine: Any, prompts: Sequence[Any], concurrency: int) -> dict:
    t0 = time.perf_counter()
    result = await run_round(
        engine, prompts, LoadShape(concurrency=concurrency), id_prefix=f"c{concurrency}-{time.time_ns()}"
    )
    wall = time.perf_counter() - t0
    ok = [r for r in result.records if r.ok]
    audio = sum(audio_duration(sum(r.chunk_samples), r.sample_rate) for r in ok)
    first = [t for r in ok if (t := audio_ttfp(r.start, r.chunk_times, r.chunk_samples)) is not None]
    return {
        "audio_s_per_s": audio / wall,
        "requests_per_s": len(ok) / wall,
        "mean_first_audio_ms": 1000 * float(np.mean(first)) if first else float("nan"),
        "p99_first_audio_ms": 1000 * float(np.percentile(first, 99)) if first else float("nan"),
        "completed": len(ok),
        "audio_s": audio,
        "hit_cap": sum(1 for r in ok if r.info is not None and r.info.hit_cap),
    }


class EngineThread:
    """The in-process engine on its own event loop (it is bound to the loop it started on), so the
    interleaved rounds can be plain calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="omni-engine-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 1800) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# ------------------------------------------------------------------ the run


def main_run(args: argparse.Namespace) -> int:
    from omnicli.vllm_omni.engine import OmniEngine

    install_import_shims()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    ckpt = args.ckpt.resolve()
    if not ckpt.exists():
        info = build_tiny_qwen3_tts(ckpt, seed=0, kind="base", stop_frames=args.stop_frames)
        print(f"built a tiny Base checkpoint at {ckpt} (talker stops after ~{args.stop_frames:g} frames, "
              f"EOS logit {info['eos_logit']:.2f})", flush=True)
    levels = [int(c) for c in args.concurrency.split(",")]
    slots = args.max_num_seqs or max(levels)
    resolved = load_profile(args.profile, platform="cpu", overrides=[
        f"model_path={ckpt}", f"talker.max_num_seqs={slots}", f"codec.max_num_seqs={slots}",
        "model_options.language=English"])  # as vLLM-Omni's Seed-TTS rows ask (the placeholder length depends on it)
    overlay = build_overlay(resolved, ckpt)
    overlay_path = write_overlay(overlay, out)
    tmp = Path(tempfile.mkdtemp(prefix="bench-http-", dir=out))
    manifest = demo_rows(args.rows, tmp / "seed-tts")
    prompts = load_prompts(manifest, num_prompts=args.rows, shuffle=False, max_new_tokens=args.tokens,
                           request_fields={} if args.seed is None else {"seed": args.seed}).prompts
    print(f"overlay {overlay_path} (digest {overlay.digest}); {len(prompts)} rows; cap {args.tokens} tokens; "
          f"{slots} slots per stage", flush=True)

    server = Server(ckpt, overlay_path, args.port, out / "server.log")
    loop = EngineThread()
    engine = None
    figures: dict[str, dict[int, list[dict]]] = {"http": {c: [] for c in levels}, "in_process": {c: [] for c in levels}}
    starts: dict[str, float] = {}
    try:
        try:
            starts["http"] = server.wait_ready()
        except RuntimeError as exc:
            print(f"HTTP path: vLLM-Omni's server did not start: {exc}\n--- server log (tail) ---\n{server.tail()}")
            return 3
        print(f"server ready in {starts['http']:.0f} s", flush=True)
        engine = loop.run(OmniEngine.start(resolved))
        starts["in_process"] = engine.startup_seconds
        print(f"in-process engine ready in {engine.startup_seconds:.0f} s", flush=True)
        # One discarded warm-up pass per side (first requests pay for lazy initialisation).
        try:
            http_round(ckpt, manifest, min(4, args.rows), 4, args.tokens, args.port, tmp, args.seed)
        except RuntimeError as exc:
            errors = [ln for ln in server.tail(400).splitlines() if "Error" in ln][-6:]
            print(f"HTTP path: the server started but failed its first requests: {exc}\n" + "\n".join(errors))
            return 3
        loop.run(in_process_round(engine, prompts[:4], 4))
        for c in levels:
            def http(c: int = c) -> float:
                fig = http_round(ckpt, manifest, args.rows, c, args.tokens, args.port, tmp, args.seed)
                figures["http"][c].append(fig)
                return fig["audio_s_per_s"]

            def in_process(c: int = c) -> float:
                fig = loop.run(in_process_round(engine, prompts, c))
                figures["in_process"][c].append(fig)
                return fig["audio_s_per_s"]

            def told(side: str, r: int, _value: float, c: int = c) -> None:
                fig = figures[side][c][-1]
                print(f"c={c} round {r + 1} {side:10} " + "  ".join(f"{k} {fig[k]:.3f}" for k in FIGURES)
                      + f"  audio {fig['audio_s']:.2f} s  completed {fig['completed']}/{args.rows}"
                      + f"  load {os.getloadavg()[0]:.1f}", flush=True)

            rounds = run_interleaved({"http": http, "in_process": in_process}, rounds=args.rounds, on_round=told)
            for side, phase in rounds.items():
                for fig, load in zip(figures[side][c], phase.load, strict=True):
                    fig["load"] = load
    finally:
        if engine is not None:
            loop.run(engine.close(), timeout=300)
        loop.stop()
        server.stop()
    report(figures, levels)
    (out / "results.json").write_text(json.dumps({
        "profile": args.profile, "overlay_digest": overlay.digest, "rows": args.rows, "tokens": args.tokens,
        "slots": slots, "start_seconds": starts, "rounds": figures}, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(figures: dict, levels: list[int]) -> None:
    print("\nmedian (min-max) over rounds; in-process / HTTP: ratio of medians, bootstrap 90% interval")
    for c in levels:
        loads = [f["load"] for side in figures.values() for f in side[c] if "load" in f]
        print(f"concurrency {c} (load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f}):")
        for key in FIGURES:
            a = [f[key] for f in figures["in_process"][c]]
            b = [f[key] for f in figures["http"][c]]
            line = f"  {key:20} in-process {_spread(a)}   HTTP {_spread(b)}"
            if a and b and all(np.isfinite(a + b)) and min(b) > 0:
                line += "   " + ratio_summary(a, b)
            print(line)
        done = {side: sum(f["completed"] for f in figures[side][c]) for side in figures}
        print(f"  completed requests: in-process {done['in_process']}, HTTP {done['http']}")


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{np.median(values):9.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt", type=Path,
                    help="a Qwen3-TTS Base checkpoint (built here, with a stopping talker, if absent)")
    ap.add_argument("--profile", default="qwen3-tts")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=150, help="talker token cap per request, both sides")
    ap.add_argument("--stop-frames", type=float, default=25.0,
                    help="mean talker frames before EOS of a built checkpoint")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed every request (both sides, the speech endpoint's own field): the same rows then "
                         "generate the same lengths in every round, so the rounds compare equal work")
    ap.add_argument("--port", type=int, default=8091)
    ap.add_argument(
        "--max-num-seqs", type=int, default=0, help="slots per stage, both sides (0: the largest concurrency)"
    )
    ap.add_argument("--out", type=Path, default=Path("bench-vllm-omni-http"))
    args = ap.parse_args()
    sys.exit(main_run(args))


if __name__ == "__main__":
    main()
