"""Cost of the work around the engine as a run grows: seconds and peak memory of the real
`omni` commands at 1/10 of a size and at the full size, to show that each grows no faster
than linearly (a 10x larger input within 12x the time).

    python scripts/bench_scale_costs.py              # 20,000 and 200,000 rows
    python scripts/bench_scale_costs.py --rows 50000 # 5,000 and 50,000

Measured, each in a fresh `omni` process (peak RSS from wait4):

- planning: `omni synth MANIFEST --out NEW --limit 5` on a manifest of N rows, up to the
  engine start (a profile whose KV cache cannot fit makes the engine refuse at once, so
  what is timed is reading the manifest and planning);
- resume: `omni synth MANIFEST --out OUT` where OUT holds N ok rows (results.jsonl and
  N wavs): nothing to do, no engine; and the same with `--limit 5`;
- merge: `omni synth-merge` of 8 shard folders of N/8 rows each into a new folder.

The wavs are hard links to a few short template files (what is measured is the command's
work per row, not the disk's); the folders go in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from omnicli.audio import write_wav_atomic
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.plan import RESULTS, input_digest
from omnicli.synth.results import Status, SynthResult
from omnicli.synth.shard import ShardSpec, select_shard
from omnicli.synth.summary import build_synth_summary, write_summary

SR = 24_000
LINKS_PER_TEMPLATE = 25_000  # ext4 allows 65,000 links to one file; a merge adds one more per wav
NO_ENGINE = ["--set", "talker.kv_cache_space_gb=100000"]  # the engine refuses before loading anything


def make_manifest(folder: Path, rows: int) -> Path:
    path = folder / "meta.lst"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            f.write(f"utt{i:07d}|||Sentence number {i} of the manifest, a line of ordinary length.\n")
    return path


class Wavs:
    """Hard links to template wavs of 0.1 s, a new template every LINKS_PER_TEMPLATE links."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.count = 0
        self.template: Path | None = None

    def link(self, dest: Path) -> None:
        if self.count % LINKS_PER_TEMPLATE == 0:
            self.template = self.folder / f"template{self.count // LINKS_PER_TEMPLATE}.wav"
            write_wav_atomic(self.template, np.zeros(SR // 10, np.float32), SR)
        os.link(self.template, dest)
        self.count += 1


def fill_folder(out: Path, manifest, resolved, wavs: Wavs, shard: ShardSpec | None = None) -> None:
    """What a finished `omni synth` leaves: one ok row and wav per manifest row, a summary."""
    out.mkdir(parents=True)
    with open(out / RESULTS, "w", encoding="utf-8") as f:
        for row in manifest.rows:
            wavs.link(out / f"{row.utt}.wav")
            result = SynthResult(
                utt=row.utt,
                status=Status.OK,
                line=row.line_no,
                wav=f"{row.utt}.wav",
                audio_seconds=0.1,
                ttfp_s=0.05,
                e2el_s=0.2,
                rtf=2.0,
                finish_reason="stop",
                ref_cache="none",
                input_digest=input_digest(row),
                profile_digest=resolved.digest,
                finished_at="2026-12-01T00:00:00+00:00",
            )
            f.write(result.to_line() + "\n")
    write_summary(
        out,
        build_synth_summary(
            manifest, out, None, resolved=resolved, started_at="t0", shard=str(shard) if shard else None
        ),
    )


def timed(args: list[str]) -> tuple[float, float, int]:
    """Runs `omni ARGS` in a fresh process: (seconds, peak RSS in MB, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "omnicli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def measure(rows: int, work: Path, steps: list[str]) -> dict[str, tuple[float, float, int]]:
    work.mkdir(parents=True)
    resolved = load_profile("cpu")
    manifest_path = make_manifest(work, rows)
    manifest = read_manifest(manifest_path)
    wavs = Wavs(work)
    done = work / "done"
    fill_folder(done, manifest, resolved, wavs)
    shards = []
    for i in range(8):
        spec = ShardSpec(i, 8)
        shards.append(work / f"shard-{i}")
        fill_folder(shards[-1], select_shard(manifest, spec), resolved, wavs, spec)
    m = str(manifest_path)
    commands = {
        "planning": (
            "planning (--limit 5, new folder)",
            ["synth", m, "--out", str(work / "new"), "--limit", "5", "-p", "cpu", *NO_ENGINE],
        ),
        "resume": ("resume (all ok)", ["synth", m, "--out", str(done), "-p", "cpu"]),
        "resume-limit": ("resume (--limit 5)", ["synth", m, "--out", str(done), "--limit", "5", "-p", "cpu"]),
        "merge": ("merge (8 shards)", ["synth-merge", *map(str, shards), "--out", str(work / "merged")]),
        "re-merge": (
            "merge again into the same folder",
            ["synth-merge", *map(str, shards), "--out", str(work / "merged")],
        ),
    }
    return {label: timed(args) for step, (label, args) in commands.items() if step in steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="the full size; the small one is a tenth of it")
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where to build the folders (default: the system's temp folder)"
    )
    parser.add_argument(
        "--steps", default="planning,resume,resume-limit,merge,re-merge", help="which of them to run, in this order"
    )
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="omni-scale-", dir=args.tmp))
    try:
        steps = args.steps.split(",")
        small = measure(args.rows // 10, base / "small", steps)
        full = measure(args.rows, base / "full", steps)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs")
    print(
        f"{'step':34} {'rows':>8} {'s':>7} {'MB':>7} | {'rows':>8} {'s':>7} {'MB':>7} | {'time x':>6} {'mem x':>6}  "
        "exit"
    )
    for step in small:
        (ts, ms, cs), (tf, mf, cf) = small[step], full[step]
        print(
            f"{step:34} {args.rows // 10:>8,} {ts:>7.2f} {ms:>7.0f} | {args.rows:>8,} {tf:>7.2f} {mf:>7.0f} | "
            f"{tf / ts:>6.1f} {mf / ms:>6.1f}  {cs},{cf}"
        )
    print("target: time x within 12 for 10x the rows (exit 3 for planning: the engine refused, as intended)")


if __name__ == "__main__":
    main()
