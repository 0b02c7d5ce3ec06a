"""NeuTTS Air at real size (random weights): the engine against the neutts reference loop, in one run.

    python scripts/bench_neutts.py CACHE_DIR [--quick] [--rows 32] [--tokens 100] [--concurrency 1,8,32]

Phases, each in its own process so that no two real-size models are in memory
at once (the engine alone needs 6-8 GiB here):

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
   utterance after another, references encoded beforehand (as neutts'
   `encode_reference`). Random weights pick any of the ~217k ids, not only the
   65,536 speech tokens real weights emit, so every generated id is decoded as
   a code (id mod 65,536) and audio is counted at 50 tokens per second, as for
   the engine: both then pay for the same amount of audio.
4. talker-only: vLLM (the engine's Talker, same profile, sampling and prompts)
   without the codec; tokens counted and converted at 50 tokens per audio second.
5. engine: `omni bench` (the real CLI) with coalescing off and on, the same
   rows, concurrency sweep; talker tokens/s, codec ms per audio second,
   audio-s/s, mean first-audio latency.

Prints one table and the ratios (engine / reference, engine efficiency =
engine audio-s/s / talker-only audio-s/s) and writes CACHE_DIR/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "omnicli" / "data" / "demo" / "meta.lst"
CPU_PROFILE = REPO / "omnicli" / "data" / "profiles" / "cpu.yaml"
TOKENS_PER_AUDIO_S = 50.0
COALESCING = {"off": {}, "on": {"generation_min_batch_size": 8, "generation_max_wait_ms": 10,
                                "generation_coalescing_policy": "idle_wait"}}


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
            "max_model_len": 2048, "kv_cache_space_gb": 1.0, "threads": 1}


def write_profile(cache: Path, args, name: str) -> Path:
    import yaml

    ckpt = cache / "checkpoint"
    prof = {
        "base_config": str(CPU_PROFILE),
        "model": "neutts-air", "model_path": str(ckpt / "talker"), "codec_path": str(ckpt / "codec"),
        "talker": talker_yaml(args),
        "codec": {"max_num_seqs": max(args.conc), "threads": 1, **COALESCING[name]},
    }
    path = cache / f"coalescing-{name}.yaml"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return path


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
    backbone = AutoModelForCausalLM.from_pretrained(ckpt / "talker", dtype=torch.bfloat16, trust_remote_code=False).eval()
    model, features = load_neucodec(ckpt / "codec", dtype="float32")
    codec = NeuCodecCodec(model, features, lookback=neutts.LOOKBACK_FRAMES, lookahead=neutts.LOOKAHEAD_FRAMES,
                          overlap=neutts.OVERLAP_FRAMES)
    stop = data["stop"][0]

    def synth(prompt: list[int], seed: int) -> tuple[int, float, int]:
        torch.manual_seed(seed)
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = backbone.generate(ids, attention_mask=torch.ones_like(ids), max_length=2048, do_sample=True,
                                    temperature=1.0, top_k=50, use_cache=True, min_new_tokens=50,
                                    max_new_tokens=args.tokens, eos_token_id=stop, pad_token_id=stop)
            new = out[0, len(prompt):]
            new = new[new != stop]
            codes = ((new - data["speech_0"]) % neutts.CODEBOOK_SIZE).view(1, -1, 1)
            t0 = time.perf_counter()
            audio = codec.decode_frames(codes)
            return int(new.numel()), time.perf_counter() - t0, audio.shape[-1]

    synth(data["prompts"][0], -1)  # warm-up (first-call allocations), not timed
    n = args.rows
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
            "mean_first_audio_ms": 1000 * sum(firsts) / len(firsts)}


def phase_talker(cache: Path, args) -> dict:
    """vLLM alone (the engine's Talker), same prompts, sampling and cap; no codec."""
    from omnicli.engine.talker import Talker
    from omnicli.profile import load_profile

    data = json.loads((cache / "prompts.json").read_text())
    rp = load_profile(str(write_profile(cache, args, "off")))
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
            for c in args.conc:
                rows = data["prompts"][: args.rows]
                sem = asyncio.Semaphore(c)

                async def limited(i: int, p: list[int], c=c, sem=sem) -> int:
                    async with sem:
                        return await one(f"c{c}-{i}", p, i)

                t0 = time.perf_counter()
                counts = await asyncio.gather(*(limited(i, p) for i, p in enumerate(rows)))
                wall = time.perf_counter() - t0
                out[str(c)] = {"rows": len(rows), "tokens": sum(counts), "wall_s": wall,
                               "talker_tokens_per_s": sum(counts) / wall,
                               "audio_s_per_s": sum(counts) / TOKENS_PER_AUDIO_S / wall}
        finally:
            tk.shutdown()
        return out

    return asyncio.run(run())


def phase_engine(cache: Path, args) -> dict:
    """One `omni bench` A/B: coalescing off then on (engines one at a time), the concurrency sweep on each."""
    profiles = [write_profile(cache, args, name) for name in ("off", "on")]
    res = cache / "engine-bench.json"
    res.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "omnicli", "bench", str(DEMO), "-n", str(args.rows), "-c", args.concurrency,
           "--disable-shuffle", "--warmup", "4", "--max-new-tokens", str(args.tokens), "--seed", "0",
           *[x for p in profiles for x in ("--profile", str(p))],
           "--result-dir", str(cache), "--result-filename", res.name, "--format", "text"]
    log = cache / "engine-bench.log"
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=child_env()).returncode
    if rc != 0 or not res.exists():
        raise SystemExit(f"omni bench exited {rc}; see {log}")
    out: dict = {"off": {}, "on": {}}
    for run in json.loads(res.read_text())["runs"]:
        name = "on" if "coalescing-on" in str(run["profile_label"]) else "off"
        stats = run.get("engine_stats", {})
        audio = run["total_audio_duration_s"]
        out[name][str(run["max_concurrency"])] = {
            "rows": run["num_prompts"], "completed": run["completed"], "failed": run["failed"],
            "wall_s": run["duration"], "audio_s": audio, "audio_s_per_s": run["audio_throughput"],
            "talker_tokens_per_s": run["talker_tokens_per_s"],
            "codec_ms_per_audio_s": 1000 * stats["codec_compute_s"] / audio if audio and "codec_compute_s" in stats else None,
            "mean_codec_batch_size": run["mean_codec_batch_size"],
            "mean_first_audio_ms": run["mean_audio_ttfp_ms"],
            "ref_hot_cold": [run.get("num_ref_hot"), run.get("num_ref_cold")],
        }
    return out


PHASES = {"build": phase_build, "prompts": phase_prompts, "reference": phase_reference,
          "talker": phase_talker, "engine": phase_engine}


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_phase(name: str, cache: Path, argv: list[str], timeout: float, reuse: bool) -> dict:
    """Runs one phase in a fresh process (its memory is returned when it ends) and reads its JSON."""
    out = cache / f"{name}.json"
    if reuse and out.exists():
        print(f"phase {name}: reusing {out}", flush=True)
        return json.loads(out.read_text())
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, str(cache), "--phase", name, *argv], env=child_env(),
                            start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, 9)  # the phase and everything it started (vLLM's engine core)
        proc.wait()
        raise
    if rc != 0 or not out.exists():
        raise SystemExit(f"phase {name} failed (exit {rc})")
    print(f"[{time.strftime('%H:%M:%S')}] phase {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(out.read_text())


def fmt(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def report(res: dict, args) -> None:
    ref, talk, eng = res["reference"], res["talker"], res["engine"]
    print(f"\nload average at start: {res['load_start']}; at end: {res['load_end']}")
    print(f"rows: {args.rows} per pass; {args.tokens} talker tokens each "
          f"({args.tokens / TOKENS_PER_AUDIO_S:.1f} s of audio at 50 tokens/s)\n")
    head = f"{'run':<22}{'tok/s':>8}{'codec ms/aud-s':>16}{'audio-s/s':>11}{'1st audio ms':>14}{'x ref':>7}{'effic.':>8}"
    print(head)
    print("-" * len(head))
    print(f"{'reference loop (c=1)':<22}{fmt(ref['talker_tokens_per_s'], 1):>8}{fmt(ref['codec_ms_per_audio_s'], 1):>16}"
          f"{fmt(ref['audio_s_per_s'], 3):>11}{fmt(ref['mean_first_audio_ms'], 0):>14}{'1.00':>7}{'':>8}")
    for c in args.conc:
        t = talk[str(c)]
        print(f"{f'talker only c={c}':<22}{fmt(t['talker_tokens_per_s'], 1):>8}{'':>16}{fmt(t['audio_s_per_s'], 3):>11}"
              f"{'':>14}{fmt(t['audio_s_per_s'] / ref['audio_s_per_s']):>7}{'':>8}")
    for name in ("off", "on"):
        for c in args.conc:
            e = eng[name][str(c)]
            label = f"engine coal. {name} c={c}"
            if "error" in e:
                print(f"{label:<22}{e['error']}")
                continue
            eff = e["audio_s_per_s"] / talk[str(c)]["audio_s_per_s"]
            e["x_reference"], e["efficiency"] = e["audio_s_per_s"] / ref["audio_s_per_s"], eff
            print(f"{label:<22}{fmt(e['talker_tokens_per_s'], 1):>8}{fmt(e['codec_ms_per_audio_s'], 1):>16}"
                  f"{fmt(e['audio_s_per_s'], 3):>11}{fmt(e['mean_first_audio_ms'], 0):>14}"
                  f"{fmt(e['x_reference']):>7}{fmt(eff):>8}")
    top = str(max(args.conc))
    on, off = eng["on"].get(top, {}), eng["off"].get(top, {})
    if "audio_s_per_s" in on and "audio_s_per_s" in off:
        print(f"\ntargets at c={top}: >= 5x reference: {fmt(on['x_reference'])}x (on), {fmt(off['x_reference'])}x (off); "
              f"efficiency >= 0.9: {fmt(on['efficiency'])} (on), {fmt(off['efficiency'])} (off); "
              f"coalescing on/off audio-s/s: {fmt(on['audio_s_per_s'] / off['audio_s_per_s'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", type=Path, help="folder for the checkpoint (built once, reused) and the results")
    ap.add_argument("--quick", action="store_true", help="16 rows of 1 s of audio: about 30 minutes on a loaded 2-core CPU, mostly engine start-ups and c=1")
    ap.add_argument("--rows", type=int, default=32, help="rows per pass (each concurrency, and the reference loop)")
    ap.add_argument("--tokens", type=int, default=100, help="talker tokens per row (50 per second of audio)")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per phase")
    ap.add_argument("--reuse", action="store_true", help="reuse the results of phases already run in CACHE (same options!)")
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.rows, args.tokens = 16, 50
    args.conc = [int(c) for c in args.concurrency.split(",")]
    cache = args.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    if args.phase:
        result = PHASES[args.phase](cache, args)
        tmp = cache / f".{args.phase}.json.tmp"
        tmp.write_text(json.dumps(result))
        tmp.rename(cache / f"{args.phase}.json")
        return
    argv = ["--rows", str(args.rows), "--tokens", str(args.tokens),
            "--concurrency", args.concurrency, "--timeout", str(args.timeout)]
    res = {"load_start": os.getloadavg()}
    for name in ("build", "prompts", "reference", "talker", "engine"):
        res[name] = run_phase(name, cache, argv, args.timeout * (6 if name == "engine" else 1), args.reuse)
    res["load_end"] = os.getloadavg()
    res.pop("prompts")
    report(res, args)
    (cache / "results.json").write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
