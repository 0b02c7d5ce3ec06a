"""Peak memory of `omni eval`'s SIM/MOS scoring on one long clip, per clip length.

    .venv/bin/python scripts/eval_memory.py                      # DNSMOS on 30 s, 60 s and 1 h clips
    .venv/bin/python scripts/eval_memory.py --seconds 30 60 --metrics sim,mos --cap-gb 6

Each length runs in a fresh process (a 24 kHz tone with noise, written to a
temporary folder, scored by `score_audio` with the chosen metrics' default
backends) whose address space is capped at --cap-gb, so a run that would take
the machine's memory fails instead; the table gives each process's peak
resident memory, its wall time and what the row got (score, note or error).
Run it against another checkout (PYTHONPATH=OTHER) to compare before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(seconds: float, metrics: str) -> None:
    import numpy as np
    import soundfile as sf

    from omnicli.evaluation.scorers import load_scorers, score_audio
    from omnicli.manifest import ManifestRow

    with tempfile.TemporaryDirectory() as tmp:
        gen = Path(tmp)
        rate, rng = 24_000, np.random.default_rng(0)
        with sf.SoundFile(gen / "long.wav", "w", rate, 1, subtype="PCM_16") as f:  # written a minute at a time
            for start in range(0, int(seconds * rate), 60 * rate):
                n = min(60 * rate, int(seconds * rate) - start)
                t = (start + np.arange(n)) / rate
                f.write((0.3 * np.sin(2 * np.pi * 180 * t) + 0.01 * rng.standard_normal(n)).astype(np.float32))
        sf.write(gen / "ref.wav", (0.3 * np.sin(2 * np.pi * 200 * np.arange(3 * rate) / rate)).astype(np.float32), rate)
        scorers = load_scorers(tuple(metrics.split(",")))
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        row = ManifestRow(utt="long", text="x", prompt_wav=gen / "ref.wav")
        (result,) = score_audio([row], gen, scorers).results
        print(json.dumps({
            "wall_s": round(time.perf_counter() - t0, 1), "loaded_mb": base // 1024,
            "status": str(result.status), "values": result.values, "errors": result.errors,
            "notes": getattr(result, "notes", []), "error": result.error,
        }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, nargs="+", default=[30, 60, 3600])
    parser.add_argument("--metrics", default="mos", help="sim, mos or sim,mos (their default backends)")
    parser.add_argument("--cap-gb", type=float, default=8.0, help="address-space cap of each run")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.metrics)
    cap = int(args.cap_gb * (1 << 30))
    print(f"{'clip':>8} {'peak MB':>8} {'loaded MB':>9} {'wall s':>7}  outcome")
    for seconds in args.seconds:
        with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", str(seconds), "--metrics", args.metrics], stdout=out_file,
                stderr=err_file, text=True, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)),
            )
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, whatever the earlier ones took
            proc.returncode = os.waitstatus_to_exitcode(status)
            out_file.seek(0), err_file.seek(0)
            stdout, stderr = out_file.read(), err_file.read()
        peak_mb = usage.ru_maxrss // 1024
        lines = stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            tail = (stderr.strip().splitlines() or ["(no output)"])[-1][:100]
            print(
                f"{seconds:>7g}s {peak_mb:>8} {'-':>9} {'-':>7}  failed (exit {proc.returncode}, cap {args.cap_gb:g} "
                f"GB): {tail}"
            )
            continue
        out = json.loads(lines[-1])
        what = out["values"] or out["errors"] or out["error"]
        notes = f"; notes: {out['notes']}" if out["notes"] else ""
        print(f"{seconds:>7g}s {peak_mb:>8} {out['loaded_mb']:>9} {out['wall_s']:>7}  {out['status']}: {what}{notes}")


if __name__ == "__main__":
    main()
