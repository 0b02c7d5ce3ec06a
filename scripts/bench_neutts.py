"""NeuTTS Air at real size (random weights): the engine against the neutts reference loop, in one run.

    python scripts/bench_neutts.py CACHE_DIR [--quick] [--rows 32] [--tokens 100] [--concurrency 1,8,32] [--rounds 3]
        [--engines preset,old-chunks] [--reference-rows N]

Phases, each in its own process so that no two real-size models are in memory
at once (the engine alone needs 6-8 GiB here). The compared phases (3-5) run
in alternating rounds (reference, talker-only, each engine variant,
reference, ...; `--rounds`, default 3), so that load drifting on the machine
falls on each of them alike (omnicli/benchmark/compare.py); each round of a
phase is a fresh process, its model loaded and warmed up anew:

1. build (once; reused from CACHE_DIR/checkpoint): `omni models build-tiny
   neutts-air --real-size` layout, Qwen2.5-0.5B dimensions, bfloat16 talker,
   published NeuCodec config, random weights.
2. prompts: the demo set's rows (cycled, in order), their references encoded by
   our NeuCodec encoder and the prompt ids built by our prompt builder (both
   parity-checked against the neutts package by `omni models verify`).
3. reference: a reproduction of the neutts 1.4.1 synthesis loop from its source
   (its import chain fails beside torch 2.13 here): transformers
   `Qwen2ForCausalLM` in bfloat16, `generate(max_length=2048, do_sample=True,
   temperature=1.0, top_k=50, use_cache=True, min_new_tokens=50)` capped by
   `max_new_tokens`, then a full-sequence NeuCodec decode in float32, one
   utterance after another (`--reference-rows` of them), references encoded
   beforehand (as neutts' `encode_reference`). Random weights pick any of the
   ~217k ids, not only the 65,536 speech tokens real weights emit, so every
   generated id is decoded as a code (id mod 65,536) and audio is counted at
   50 tokens per second, as for the engine: both then pay for the same amount
   of audio. It also times a first chunk's codec window alone (1 thread).
4. talker-only: vLLM (the engine's Talker, same profile, sampling and prompts)
   without the codec; tokens counted and converted at 50 tokens per audio
   second. First it runs 4 prompts alone, for as many tokens as a first chunk
   needs: their prefill time per prompt token and the decode of the rest of a
   first chunk, the terms of the first-audio floor.
5. engine: `omni bench --save-detailed` (the real CLI), one process per engine
   variant (`--engines`, ENGINES below: `preset` is the cpu preset as shipped;
   the others change one setting), the same rows, concurrency sweep; talker
   tokens/s, codec ms per audio second, audio-s/s, mean first-audio latency
   and, from each request's submission time, its first-audio floor: an ideal
   talker that runs the queued prefills back to back in submission order and
   then this request's first chunk as fast as alone, plus the codec's first
   window alone (`first_audio_floors`).

Prints per phase (and concurrency) the median audio-s/s over the rounds, its
min-max and the load average during those rounds; one table of the medians;
the ratios (engine / reference, efficiency = engine / talker only, codec ms
per audio-s engine / reference, first audio / its floor, each variant / the
first) with their bootstrap 90% intervals ("no difference measured" when one
spans 1.0); and the ceiling: CPU seconds per audio second of the talker alone
(vLLM's process tree, at each concurrency) and of the codec alone (the
reference's full-sequence decode), the audio-s/s they allow on this many
cores (cores / their sum), and the engine's fraction of it. Writes
CACHE_DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from omnicli.benchmark.compare import run_interleaved

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "omnicli" / "data" / "demo" / "meta.lst"
CPU_PROFILE = REPO / "omnicli" / "data" / "profiles" / "cpu.yaml"
TOKENS_PER_AUDIO_S = 50.0
# Engine variants (`--engines`): the profile sections each one sets over the cpu preset. "preset" is the preset
# as shipped (thread counts, coalescing, the family's chunk geometry: nothing is set here).
ENGINES: dict[str, dict[str, dict]] = {
    "preset": {},
    "coal-on": {"codec": {"generation_min_batch_size": 8, "generation_max_wait_ms": 10,
                          "generation_coalescing_policy": "idle_wait"}},
    "coal-off": {"codec": {"generation_min_batch_size": 1, "generation_max_wait_ms": 0}},
    "old-chunks": {"codec": {"initial_codec_chunk_frames": 5, "codec_chunk_frames": 25}},  # before 2026-12-02
    "talker2": {"talker": {"threads": 2}},
    # at most 512 prompt tokens per talker step (vLLM's budget; with chunked prefill off on CPU it must hold
    # max_model_len, which 512 does for these prompts plus 100 tokens): about two prefills per step
    "prefill512": {"talker": {"max_model_len": 512, "max_num_batched_tokens": 512}},
    # the talker's prefill gate (omnicli/engine/prefill_gate.py) at 512 / 1024 prompt tokens awaiting prefill,
    # vLLM's step budget left at max_model_len; and no gate: a budget equal to the benchmark's max_model_len
    # (talker_yaml) gates nothing (what run 1 of 2026-12-02 measured as "preset"; the cpu preset's 4096 gates
    # nothing either, and gives vLLM a 4096-token step here)
    "admit512": {"talker": {"max_num_batched_tokens": 512}},
    "admit1024": {"talker": {"max_num_batched_tokens": 1024}},
    "no-gate": {"talker": {"max_num_batched_tokens": 2048}},
    "codec2": {"codec": {"threads": 2}},
    "fp32-codec": {"codec": {"dtype": "float32"}},
    "bf16-codec": {"codec": {"dtype": "bfloat16"}},
}
FLOOR_CALIBRATION_PROMPTS = 4  # prompts run alone by the talker phase to time a prefill and a first chunk


def demo_rows(n: int) -> list[dict]:
    """The first n demo rows, cycled in file order (what `omni bench --disable-shuffle -n N` measures)."""
    rows = []
    for line in DEMO.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            utt, ref_text, wav, text = line.split("|")
            rows.append({"utt": utt, "ref_text": ref_text, "ref_wav": str(DEMO.parent / wav), "text": text})
    return [rows[i % len(rows)] for i in range(n)]


def talker_yaml(args) -> dict:
    return {"dtype": "bfloat16", "max_num_seqs": max(args.conc), "max_new_tokens": args.tokens,
            "max_model_len": 2048, "kv_cache_space_gb": 1.0}


def write_profile(cache: Path, args, name: str) -> Path:
    """The cpu preset plus the benchmark's capacities and the variant's settings (ENGINES[name])."""
    import yaml

    ckpt = cache / "checkpoint"
    variant = ENGINES[name]
    prof = {
        "base_config": str(CPU_PROFILE),
        "model": "neutts-air", "model_path": str(ckpt / "talker"), "codec_path": str(ckpt / "codec"),
        "talker": {**talker_yaml(args), **variant.get("talker", {})},
        "codec": {"max_num_seqs": max(args.conc), **variant.get("codec", {})},
    }
    if "generation_min_batch_size" in prof["codec"]:  # the coalescing target cannot exceed the codec's slots
        prof["codec"]["generation_min_batch_size"] = min(prof["codec"]["generation_min_batch_size"], max(args.conc))
    path = cache / f"engine-{name}.yaml"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return path


def first_chunk_frames(profile: Path) -> int:
    """Talker frames a request's first audio waits for: its first chunk plus the codec's look-ahead."""
    from omnicli.engine.chunker import stream_geometry
    from omnicli.engine.models import neutts
    from omnicli.profile import load_profile

    cfg = stream_geometry(load_profile(str(profile)), neutts.NeuTTSAdapter.stream_geometry)
    return (cfg.codec_chunk_ramp or [cfg.initial_codec_chunk_frames])[0] + neutts.LOOKAHEAD_FRAMES


# -- phases (each runs in a child process: `--phase NAME`) ----------------------------------------
def phase_build(cache: Path, _args) -> dict:
    from omnicli.families import build_tiny

    ckpt = cache / "checkpoint"
    if (ckpt / "BUILD_INFO.json").exists():
        return {"reused": True, **json.loads((ckpt / "BUILD_INFO.json").read_text())}
    t0 = time.perf_counter()
    info = build_tiny("neutts-air", ckpt, seed=0, real_size=True)
    return {"reused": False, "build_s": time.perf_counter() - t0, **info}


def phase_prompts(cache: Path, args) -> dict:
    import soundfile as sf
    import torch

    from omnicli.engine.models import load_model
    from omnicli.engine.ref_cache import ReferenceCache

    torch.set_num_threads(2)
    ckpt = cache / "checkpoint"
    adapter = load_model("neutts-air", model_path=str(ckpt / "talker"), codec_path=str(ckpt / "codec"))
    refs = ReferenceCache(adapter.codec.encoder, adapter.ref_sample_rate, adapter.max_ref_samples)
    codes: dict[str, list[int]] = {}
    prompts = []
    for row in demo_rows(args.rows):
        if row["ref_wav"] not in codes:
            pcm, sr = sf.read(row["ref_wav"], dtype="float32")
            codes[row["ref_wav"]] = refs.encode(row["ref_wav"], refs.prepare(pcm, sr)).reshape(-1).tolist()
        prompts.append(adapter.build_prompt(row["text"], row["ref_text"], codes[row["ref_wav"]]))
    return {"prompts": prompts, "allowed": adapter.allowed_token_ids(), "stop": adapter.stop_token_ids(),
            "speech_0": adapter.ids["speech_0"], "sampling": adapter.sampling_overrides()}


def phase_reference(cache: Path, args) -> dict:
    """The neutts loop: one utterance after another, bf16 backbone generate + float32 full decode."""
    import torch
    from transformers import AutoModelForCausalLM

    from omnicli.engine.models import neutts
    from omnicli.engine.models.neucodec_codec import NeuCodecCodec, load_neucodec

    torch.set_num_threads(2)
    ckpt = cache / "checkpoint"
    data = json.loads((cache / "prompts.json").read_text())
    backbone = AutoModelForCausalLM.from_pretrained(
        ckpt / "talker", dtype=torch.bfloat16, trust_remote_code=False
    ).eval()
    model, features = load_neucodec(ckpt / "codec", dtype="float32")
    codec = NeuCodecCodec(model, features, lookback=neutts.LOOKBACK_FRAMES, lookahead=neutts.LOOKAHEAD_FRAMES,
                          overlap=neutts.OVERLAP_FRAMES)
    stop = data["stop"][0]
    decode_cpu_s = 0.0

    def synth(prompt: list[int], seed: int) -> tuple[int, float, int]:
        nonlocal decode_cpu_s
        torch.manual_seed(seed)
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = backbone.generate(ids, attention_mask=torch.ones_like(ids), max_length=2048, do_sample=True,
                                    temperature=1.0, top_k=50, use_cache=True, min_new_tokens=50,
                                    max_new_tokens=args.tokens, eos_token_id=stop, pad_token_id=stop)
            new = out[0, len(prompt):]
            new = new[new != stop]
            codes = ((new - data["speech_0"]) % neutts.CODEBOOK_SIZE).view(1, -1, 1)
            t0, c0 = time.perf_counter(), time.process_time()
            audio = codec.decode_frames(codes)
            decode_cpu_s += time.process_time() - c0  # every thread of this process: only the decode runs now
            return int(new.numel()), time.perf_counter() - t0, audio.shape[-1]

    synth(data["prompts"][0], -1)  # warm-up (first-call allocations), not timed
    decode_cpu_s = 0.0
    first_chunk_s = time_first_chunk(codec, first_chunk_frames(write_profile(cache, args, "preset")))
    n = args.reference_rows or args.rows
    tokens = decode_s = 0.0
    t0 = time.perf_counter()
    firsts = []
    for i, prompt in enumerate(data["prompts"][:n]):
        ts = time.perf_counter()
        k, d, _ = synth(prompt, i)
        firsts.append(time.perf_counter() - ts)  # the loop returns whole utterances: first audio = all of it
        tokens += k
        decode_s += d
    wall = time.perf_counter() - t0
    audio_s = tokens / TOKENS_PER_AUDIO_S
    return {"rows": n, "tokens": tokens, "wall_s": wall, "audio_s": audio_s, "audio_s_per_s": audio_s / wall,
            "talker_tokens_per_s": tokens / (wall - decode_s), "codec_ms_per_audio_s": 1000 * decode_s / audio_s,
            "mean_first_audio_ms": 1000 * sum(firsts) / len(firsts), "codec_cpu_s_per_audio_s": decode_cpu_s / audio_s,
            "codec_first_chunk_s": first_chunk_s}


def time_first_chunk(codec, frames: int) -> float:
    """Seconds of a first chunk's decode alone (its window: `frames`, no look-back), on 1 thread as the
    engine's codec stage runs; the median of 5 after a warm-up: a term of the first-audio floor."""
    import numpy as np
    import torch

    from omnicli.engine.models import neutts

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    codes = torch.from_numpy(np.random.default_rng(0).integers(0, neutts.CODEBOOK_SIZE, (1, frames, 1)))
    times = []
    try:
        with torch.no_grad():
            for _ in range(6):
                t0 = time.perf_counter()
                codec.decode_frames(codes)
                times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return statistics.median(times[1:])


def tree_cpu_s() -> float:
    """CPU seconds of this process and its live children (vLLM's engine core runs in one)."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def phase_talker(cache: Path, args) -> dict:
    """vLLM alone (the engine's Talker), same prompts, sampling and cap; no codec."""
    from omnicli.engine.talker import Talker
    from omnicli.profile import load_profile

    data = json.loads((cache / "prompts.json").read_text())
    profile = write_profile(cache, args, "preset")
    rp = load_profile(str(profile))
    cfg = rp.profile.talker.model_copy(update=data["sampling"])

    async def run() -> dict:
        tk = await Talker.start(str(cache / "checkpoint" / "talker"), data["allowed"], cfg, platform="cpu", seed=0,
                                stop_token_ids=data["stop"])
        out = {}
        try:
            async def one(rid: str, prompt: list[int], seed: int) -> int:
                n = 0
                async for d in tk.generate(rid, prompt, args.tokens, seed):
                    n += len(d.token_ids)
                return n

            # Warm up as `omni bench --warmup 4` warms the engine (4 requests at once, first concurrency
            # permitting): a talker warmed with one request alone pays for its first batch in the pass.
            warm = data["prompts"][:4]
            await asyncio.gather(*(one(f"warm-{i}", p, i) for i, p in enumerate(warm[: min(len(warm), args.conc[0])])))
            out["calibration"] = await calibrate(tk, data["prompts"], first_chunk_frames(profile))
            for c in args.conc:
                rows = data["prompts"][: args.rows]
                sem = asyncio.Semaphore(c)

                async def limited(i: int, p: list[int], c=c, sem=sem) -> int:
                    async with sem:
                        return await one(f"c{c}-{i}", p, i)

                t0, cpu0 = time.perf_counter(), tree_cpu_s()
                counts = await asyncio.gather(*(limited(i, p) for i, p in enumerate(rows)))
                wall, cpu = time.perf_counter() - t0, tree_cpu_s() - cpu0
                audio_s = sum(counts) / TOKENS_PER_AUDIO_S
                out[str(c)] = {"rows": len(rows), "tokens": sum(counts), "wall_s": wall,
                               "talker_tokens_per_s": sum(counts) / wall, "audio_s_per_s": audio_s / wall,
                               "talker_cpu_s_per_audio_s": cpu / audio_s if audio_s else None}
        finally:
            tk.shutdown()
        return out

    return asyncio.run(run())


async def calibrate(tk, prompts: list[list[int]], first_frames: int) -> dict:
    """The talker's costs alone, for the first-audio floor: each of the first prompts run by itself
    for `first_frames` tokens: its prefill (submission to first token) per prompt token, and the
    decode of the rest of a first chunk (first to last token)."""
    prefill, tokens, rest = [], [], []
    for i, prompt in enumerate(prompts[:FLOOR_CALIBRATION_PROMPTS]):
        t0 = time.perf_counter()
        times = []
        async for d in tk.generate(f"calib-{i}", prompt, first_frames, 10_000 + i):
            if d.token_ids:
                times.append(time.perf_counter())
        prefill.append(times[0] - t0)
        tokens.append(len(prompt))
        rest.append(times[-1] - times[0])
    return {"prefill_s_per_token": sum(prefill) / sum(tokens), "first_chunk_decode_s": statistics.median(rest),
            "first_chunk_frames": first_frames, "prefill_s": prefill, "prompt_tokens": tokens}


def first_audio_floors(start_times: list[float], prompt_tokens: list[int], prefill_s_per_token: float,
                       first_chunk_s: float) -> list[float]:
    """Each request's first-audio floor on this machine: an ideal talker that runs the queued prefills
    back to back in submission order (the ones queued ahead of a request, then its own), then this
    request's first chunk as fast as alone (the rest of its tokens and the codec's first window), so
    nothing else is counted. `start_times` in submission order; seconds from submission."""
    free_at = float("-inf")  # when the ideal talker has done every prefill submitted so far
    floors = []
    for start, n in zip(start_times, prompt_tokens):
        free_at = max(free_at, start) + n * prefill_s_per_token
        floors.append(free_at - start + first_chunk_s)
    return floors


def phase_engine(cache: Path, args, name: str) -> dict:
    """One `omni bench` of one coalescing setting (`name`: off, on), the concurrency sweep on it."""
    profile = write_profile(cache, args, name)
    res = cache / f"engine-{name}-bench.json"
    res.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "omnicli", "bench", str(DEMO), "-n", str(args.rows), "-c", args.concurrency,
           "--disable-shuffle", "--warmup", "4", "--max-new-tokens", str(args.tokens), "--seed", "0", "--save-detailed",
           "--profile", str(profile),
           "--result-dir", str(cache), "--result-filename", res.name, "--format", "text"]
    log = cache / f"engine-{name}-bench.log"
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=child_env()).returncode
    if rc != 0 or not res.exists():
        raise SystemExit(f"omni bench exited {rc}; see {log}")
    out: dict = {}
    for run in json.loads(res.read_text())["runs"]:
        stats = run.get("engine_stats", {})
        audio = run["total_audio_duration_s"]
        out[str(run["max_concurrency"])] = {
            "rows": run["num_prompts"],
            "completed": run["completed"],
            "failed": run["failed"],
            "wall_s": run["duration"],
            "audio_s": audio,
            "audio_s_per_s": run["audio_throughput"],
            "talker_tokens_per_s": run["talker_tokens_per_s"],
            "codec_ms_per_audio_s": 1000 * stats["codec_compute_s"] / audio
            if audio and "codec_compute_s" in stats
            else None,
            "mean_codec_batch_size": run["mean_codec_batch_size"],
            "mean_first_audio_ms": run["mean_audio_ttfp_ms"],
            "ref_hot_cold": [run.get("num_ref_hot"), run.get("num_ref_cold")],
            "codec_chunks": stats.get("extra", {}).get("codec_chunks"),
            # submission order: --disable-shuffle takes the rows in order, so request k has prompt k
            "start_times": run.get("start_times"), "audio_ttfps": run.get("audio_ttfps"),
        }
    return out


PHASES = {"build": phase_build, "prompts": phase_prompts, "reference": phase_reference, "talker": phase_talker,
          **{f"engine-{name}": (lambda cache, args, name=name: phase_engine(cache, args, name)) for name in ENGINES}}


def compared_phases(args) -> list[str]:
    """The phases run in alternating rounds, in their order within a round."""
    return ["reference", "talker", *(f"engine-{name}" for name in args.engines)]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_phase(name: str, cache: Path, argv: list[str], timeout: float, reuse: bool, round_: int | None = None) -> dict:
    """Runs one phase in a fresh process (its memory is returned when it ends) and reads its JSON."""
    stem = name if round_ is None else f"{name}-r{round_ + 1}"
    out = cache / f"{stem}.json"
    if reuse and out.exists():
        print(f"phase {name}: reusing {out}", flush=True)
        return json.loads(out.read_text())
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, str(cache), "--phase", name, "--out", out.name, *argv],
        env=child_env(),
        start_new_session=True,
    )
    try:
        rc = proc.wait(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, 9)  # the phase and everything it started (vLLM's engine core)
        proc.wait()
        raise
    if rc != 0 or not out.exists():
        raise SystemExit(f"phase {name} failed (exit {rc})")
    print(
        f"[{time.strftime('%H:%M:%S')}] phase {stem}: {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return json.loads(out.read_text())


def fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def series(res: dict, name: str, key: str, c: int | None = None) -> list[float]:
    """One figure of a phase over its rounds (at concurrency `c` for the talker and engine phases)."""
    out = []
    for figures in res["rounds"][name]:
        entry = figures if c is None else figures.get(str(c), {})
        if isinstance(entry.get(key), (int, float)):
            out.append(float(entry[key]))
    return out


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def floor_figures(res: dict, name: str, c: int) -> tuple[list[float], list[float]]:
    """(each round's mean first-audio floor, each round's measured mean first audio), in ms, of one
    engine variant at concurrency c; empty where a figure is missing (see first_audio_floors)."""
    calib = [r["calibration"] for r in res["rounds"]["talker"] if "calibration" in r]
    codec = series(res, "reference", "codec_first_chunk_s")
    if not calib or not codec:
        return [], []
    per_token = statistics.median(x["prefill_s_per_token"] for x in calib)
    first = statistics.median(x["first_chunk_decode_s"] for x in calib) + statistics.median(codec)
    tokens = [len(p) for p in res["prompts"]]
    floors, measured = [], []
    for figures in res["rounds"][f"engine-{name}"]:
        entry = figures.get(str(c), {})
        starts, ttfps = entry.get("start_times"), entry.get("audio_ttfps")
        if not starts or not ttfps or None in ttfps:
            continue
        order = sorted(range(len(starts)), key=lambda i: starts[i])  # already submission order; sorted to be sure
        f = first_audio_floors([starts[i] for i in order], [tokens[i % len(tokens)] for i in order], per_token, first)
        floors.append(1000 * statistics.fmean(f))
        measured.append(1000 * statistics.fmean(ttfps))
    return floors, measured


def report(res: dict, args) -> None:
    from omnicli.benchmark.compare import PhaseRounds, ratio_summary

    def phase(name: str, label: str, c: int | None = None, key: str = "audio_s_per_s") -> PhaseRounds:
        # the load the phase's own process saw; rounds run before it recorded one: the load around its run here
        load = [f.get("load_avg", around) for f, around in zip(res["rounds"][name], res["load"][name])]
        return PhaseRounds(label, series(res, name, key, c), load)

    def versus(a: PhaseRounds, b: PhaseRounds) -> str:
        return ratio_summary(a.values, b.values) if a.values and b.values and min(b.values) > 0 else "-"

    names = list(args.engines)
    print(f"\nload average at start: {res['load_start']}; at end: {res['load_end']}")
    print(f"rows: {args.rows} per pass ({args.reference_rows or args.rows} for the reference loop); {args.tokens} "
          f"talker tokens each ({args.tokens / TOKENS_PER_AUDIO_S:.1f} s of audio at 50 tokens/s); {args.rounds} "
          f"alternating round(s) of {', '.join(compared_phases(args))}")
    for name in names:
        print(f"  engine {name}: {ENGINES[name] or 'the cpu preset as shipped'}")
    ref = phase("reference", "reference loop (c=1)")
    phases = {"reference": ref}
    for c in args.conc:
        phases[f"talker {c}"] = phase("talker", f"talker only c={c}", c)
        for name in names:
            phases[f"{name} {c}"] = phase(f"engine-{name}", f"engine {name} c={c}", c)
    print("\naudio-s/s per phase over its rounds:")
    for p in phases.values():
        print("  " + (p.describe(" audio-s/s") if p.values else f"{p.name}: no completed round"))

    print("\nmedians over rounds (1st audio: measured mean, and the mean of its floor on this machine):")
    head = (f"{'run':<26}{'tok/s':>8}{'codec ms/aud-s':>16}{'audio-s/s':>11}{'1st audio ms':>14}{'floor ms':>10}"
            f"{'x floor':>9}{'x ref':>7}{'effic.':>8}")
    print(head)
    print("-" * len(head))
    ref_speed = ref.median if ref.values else None

    def x_ref(speed):
        return fmt(speed / ref_speed) if speed is not None and ref_speed else "-"

    print(f"{ref.name:<26}{fmt(median(series(res, 'reference', 'talker_tokens_per_s')), 1):>8}"
          f"{fmt(median(series(res, 'reference', 'codec_ms_per_audio_s')), 1):>16}{fmt(ref_speed, 3):>11}"
          f"{fmt(median(series(res, 'reference', 'mean_first_audio_ms')), 0):>14}{'':>10}{'':>9}{'1.00':>7}{'':>8}")
    for c in args.conc:
        t = phases[f"talker {c}"]
        print(f"{t.name:<26}{fmt(median(series(res, 'talker', 'talker_tokens_per_s', c)), 1):>8}{'':>16}"
              f"{fmt(median(t.values), 3):>11}{'':>14}{'':>10}{'':>9}{x_ref(median(t.values)):>7}{'':>8}")
    for name in names:
        for c in args.conc:
            e, t = phases[f"{name} {c}"], phases[f"talker {c}"]
            speed = median(e.values)
            eff = fmt(speed / t.median) if speed is not None and t.values else "-"
            key = f"engine-{name}"
            floors, measured = floor_figures(res, name, c)
            ratio = fmt(median([m / f for m, f in zip(measured, floors)])) if floors else "-"
            print(f"{e.name:<26}{fmt(median(series(res, key, 'talker_tokens_per_s', c)), 1):>8}"
                  f"{fmt(median(series(res, key, 'codec_ms_per_audio_s', c)), 1):>16}{fmt(speed, 3):>11}"
                  f"{fmt(median(series(res, key, 'mean_first_audio_ms', c)), 0):>14}{fmt(median(floors), 0):>10}"
                  f"{ratio:>9}{x_ref(speed):>7}{eff:>8}")

    print("\nratios of medians, with their bootstrap 90% intervals:")
    codec_ref = phase("reference", "reference codec", key="codec_ms_per_audio_s")
    for c in args.conc:
        talk = phases[f"talker {c}"]
        for name in names:
            e = phases[f"{name} {c}"]
            codec = phase(f"engine-{name}", "codec", c, "codec_ms_per_audio_s")
            floors, measured = floor_figures(res, name, c)
            print(f"  c={c} {name}: engine / reference {versus(e, ref)}; efficiency (engine / talker only) "
                  f"{versus(e, talk)}; codec ms per audio-s, engine / reference {versus(codec, codec_ref)}; "
                  f"first audio / its floor {ratio_summary(measured, floors) if floors else '-'}")
        for name in names[1:]:
            print(f"  c={c}: engine {name} / {names[0]} {versus(phases[f'{name} {c}'], phases[f'{names[0]} {c}'])}")

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    codec_cpu = median(series(res, "reference", "codec_cpu_s_per_audio_s"))
    print(f"\nceiling on {cores} core(s): codec alone (the reference's full-sequence decode) "
          f"{fmt(codec_cpu, 3)} CPU-s per audio-s")
    for c in args.conc:
        talker_cpu = median(series(res, "talker", "talker_cpu_s_per_audio_s", c))
        if talker_cpu is None or codec_cpu is None:
            print(f"  c={c}: no ceiling (a CPU figure is missing)")
            continue
        ceiling = cores / (talker_cpu + codec_cpu)
        fractions = ", ".join(f"{name} {fmt(median(phases[f'{name} {c}'].values) / ceiling)}"
                              for name in names if phases[f"{name} {c}"].values)
        print(f"  c={c}: talker alone {talker_cpu:.3f} CPU-s per audio-s; ceiling {ceiling:.3f} audio-s/s "
              f"(cores / (talker + codec)); engine's fraction of it: {fractions or '-'}")
    res["summary"] = {key: {"median": p.median if p.values else None, "spread": list(p.spread) if p.values else None,
                            "load": p.mean_load} for key, p in phases.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", type=Path, help="folder for the checkpoint (built once, reused) and the results")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="16 rows of 1 s of audio: about 30 minutes a round on a loaded 2-core CPU, mostly engine start-ups and "
             "c=1",
    )
    ap.add_argument("--rows", type=int, default=32, help="rows per pass (each concurrency, and the reference loop)")
    ap.add_argument("--tokens", type=int, default=100, help="talker tokens per row (50 per second of audio)")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds of the compared phases (an interval needs 3)"
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per phase")
    ap.add_argument(
        "--reuse", action="store_true",
        help="reuse the results of phases already run in CACHE (same options!); ratios between a reused phase and "
             "one run now are not interleaved, and the machine drifts between runs (docs/models.md)"
    )
    ap.add_argument("--reference-rows", type=int, default=None,
                    help="rows of the reference loop (default: --rows); it runs them one after another, so fewer "
                         "rows give the same rate sooner")
    ap.add_argument("--engines", default="preset,old-chunks",
                    help=f"engine variants, comma-separated, the first is the base of the ratios: {', '.join(ENGINES)}")
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)  # with --phase: the file name of its JSON in CACHE
    args = ap.parse_args()
    if args.quick:
        args.rows, args.tokens = 16, 50
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    args.conc = [int(c) for c in args.concurrency.split(",")]
    args.engines = args.engines.split(",")
    if unknown := [n for n in args.engines if n not in ENGINES]:
        ap.error(f"unknown engine variant(s) {', '.join(unknown)} (known: {', '.join(ENGINES)})")
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    if args.phase:
        before = os.getloadavg()[0]
        result = PHASES[args.phase](cache, args)
        result["load_avg"] = (before + os.getloadavg()[0]) / 2  # kept with the figures: --reuse reads it back
        out = args.out or f"{args.phase}.json"
        tmp = cache / f".{out}.tmp"
        tmp.write_text(json.dumps(result))
        tmp.rename(cache / out)
        return
    argv = ["--rows", str(args.rows), "--tokens", str(args.tokens), "--concurrency", args.concurrency,
            "--timeout", str(args.timeout), *(["--reference-rows", str(args.reference_rows)] if args.reference_rows
                                              else [])]
    phases = compared_phases(args)
    res: dict = {"load_start": os.getloadavg(), "rounds": {name: [] for name in phases}}
    for name in ("build", "prompts"):
        run_phase(name, cache, argv, args.timeout, args.reuse)

    def compared(name: str):
        def one_round() -> float:
            figures = run_phase(name, cache, argv, args.timeout * (3 if name.startswith("engine") else 1), args.reuse,
                                len(res["rounds"][name]))
            res["rounds"][name].append(figures)
            return 0.0  # the figures are read from res["rounds"]; run_interleaved gives the order and the load
        return one_round

    rounds = run_interleaved({name: compared(name) for name in phases}, args.rounds)
    res["load"] = {name: rounds[name].load for name in phases}
    res["load_end"] = os.getloadavg()
    res["prompts"] = json.loads((cache / "prompts.json").read_text())["prompts"]
    report(res, args)
    (cache / "results.json").write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
