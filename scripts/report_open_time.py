#!/usr/bin/env python3
"""How big an `omni report` page gets and how long a browser takes to open it.

    .venv/bin/python scripts/report_open_time.py                 # 10,000 synthetic rows
    .venv/bin/python scripts/report_open_time.py --rows 1000 --keep /tmp/big
    .venv/bin/python scripts/report_open_time.py --page report.html --screenshot docs/report-synth.png

Without --page it writes a synth folder of N rows (results.jsonl, summary-less; every
wav a hard link to one real demo prompt, so N rows cost one file) and an eval folder
scoring them (texts from the demo set with a word changed in one row of three), builds
the page and opens it in headless Chromium (omnicli.report.browser). Printed: build
seconds, page size, seconds until the page's script finished (table and charts drawn),
and the time of one sort by WER and one text filter over all rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from omnicli.datasets import demo_manifest_path
from omnicli.evaluation.wer import score_utterance
from omnicli.manifest import read_manifest
from omnicli.report import write_report
from omnicli.report.browser import chromium, file_url, unavailable


def make_run(folder: Path, rows: int, seed: int = 0) -> Path:
    """A synth OUT of `rows` rows and its eval/ folder, as the commands write them."""
    rng = random.Random(seed)
    demo = read_manifest(demo_manifest_path()).rows
    gen = folder / "gen"
    (gen / "eval").mkdir(parents=True, exist_ok=True)
    source = demo[0].prompt_wav
    synth_rows, eval_rows = [], []
    for i in range(rows):
        entry = demo[i % len(demo)]
        utt = f"utt_{i:05d}"
        wav = gen / f"{utt}.wav"
        if not wav.exists():
            os.link(source, wav)
        hyp = entry.text if i % 3 else entry.text.replace(entry.text.split()[1], rng.choice(["blue", "under", "it"]))
        score = score_utterance(entry.text, hyp, "en")
        duration = round(rng.uniform(1.5, 4.0), 2)
        synth_rows.append(
            {
                "utt": utt,
                "status": "ok",
                "line": i + 1,
                "wav": wav.name,
                "audio_seconds": duration,
                "ttfp_s": rng.uniform(0.1, 0.4),
                "e2el_s": duration * 0.5,
                "rtf": 0.5,
                "finish_reason": "stop",
                "flags": ["hit_cap"] if i % 97 == 0 else [],
            }
        )
        eval_rows.append(
            {
                "utt": utt,
                "wer": score.wer,
                "ref": entry.text,
                "hyp": hyp,
                "status": "ok",
                "ref_norm": score.ref_norm,
                "hyp_norm": score.hyp_norm,
                "audio_s": duration,
                "reasons": ["asr_mismatch"] if score.wer > 0.5 else [],
                "substitutions": score.substitutions,
                "deletions": score.deletions,
                "insertions": score.insertions,
                "reference": str(entry.prompt_wav),
            }
        )
    (gen / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in synth_rows))
    (gen / "eval" / "eval_results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in eval_rows))
    wers = [r["wer"] for r in eval_rows]
    summary = {"metrics": ["wer"], "seed_wer_mean": 100 * sum(wers) / rows, "corpus_wer": None, "num_scored": rows,
               "num_empty_transcripts": 0, "language": "en", "asr": {"requested": "synthetic"}, "wer_threshold": 0.5,
               "asr_s_per_utt": 0.0, "num_utts": rows, "num_missing": 0, "num_failed": 0, "missing": [], "failed": [],
               "keep_failed": None, "num_retained": 0, "retention_errors": 0, "manifest": str(demo_manifest_path()),
               "gen_dir": str(gen), "profile": None, "profile_digest": None, "omni_version": "synthetic",
               "started_at": "", "wall_s": 0.0}
    (gen / "eval" / "eval_summary.json").write_text(json.dumps(summary))
    return gen


def open_page(page_path: Path, screenshot: Path | None) -> dict:
    with chromium() as context:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        start = time.perf_counter()
        page.goto(file_url(page_path), timeout=300_000)
        page.wait_for_function("window.omniReport !== undefined", timeout=300_000)
        wall = time.perf_counter() - start
        ready_ms = page.evaluate("window.omniReport.readyAt")
        timings = {"open_s": wall, "script_done_s": ready_ms / 1000}
        if page.locator("th[data-key=wer]").count():
            timings["sort_by_wer_s"] = page.evaluate(
                "() => { const t = performance.now(); document.querySelector('th[data-key=wer]').click(); return "
                "(performance.now() - t) / 1000; }"
            )
            timings["text_filter_s"] = page.evaluate(
                """() => { const i = document.getElementById('f-text'); const t = performance.now(); i.value = 'salmon';
                     i.dispatchEvent(new Event('input')); return (performance.now() - t) / 1000; }""")
            page.fill("#f-text", "")
            page.click("th[data-key=utt]")
        if screenshot is not None:
            page.wait_for_timeout(500)
            page.screenshot(path=str(screenshot), full_page=True)
        timings["errors"] = errors
        return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the synthetic run (default 10,000)")
    parser.add_argument("--keep", type=Path, help="write the synthetic run and page here (default: a temporary folder)")
    parser.add_argument("--page", type=Path, help="open this existing page instead of a synthetic one")
    parser.add_argument("--screenshot", type=Path, help="save a full-page PNG of the opened page")
    args = parser.parse_args()
    if why := unavailable():
        print(f"cannot open a browser: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if args.page is None:
            folder = args.keep or Path(tmp)
            gen = make_run(folder, args.rows)
            args.page = folder / "report.html"
            start = time.perf_counter()
            facts = write_report([gen], args.page)
            print(f"rows: {facts.rows}, build: {time.perf_counter() - start:.2f} s, page: {facts.bytes / 1e6:.2f} MB")
        else:
            print(f"page: {args.page.stat().st_size / 1e6:.2f} MB")
        timings = open_page(args.page, args.screenshot)
    errors = timings.pop("errors")
    print(", ".join(f"{k}: {v:.3f}" for k, v in timings.items()))
    if errors:
        print(f"console errors: {errors}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
