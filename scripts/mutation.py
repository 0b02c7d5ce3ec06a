#!/usr/bin/env python3
"""Mutation testing of the modules whose rules are pure and fast to test (mutmut).

    python scripts/mutation.py                   # every module below
    python scripts/mutation.py chunker wer       # some of them
    python scripts/mutation.py --show chunker    # also print each surviving mutant's diff

Each module is mutated on its own, against its own tests, in a scratch copy of
the repository under .cache/mutation/<module>/ (the working tree is never
touched). mutmut changes one operator, constant or call at a time; a mutant
is "killed" when a test fails (or it times out), "survived" when every test
still passes. The score printed per module is

    killed / (mutants - equivalent)

where EQUIVALENT lists the survivors that cannot be killed because they do
not change behaviour, each with its reason (docs/testing.md has the table).
Exit status 1 when a module scores below --target (default 90 %).
Takes minutes per module on a small machine: pass --jobs to use more cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRATCH = REPO / ".cache" / "mutation"

# module name -> (source file, the tests that state its rules)
MODULES: dict[str, tuple[str, list[str]]] = {
    "chunker": ("omnicli/engine/chunker.py", ["tests/test_chunker.py"]),
    "codec_scheduler": (
        "omnicli/engine/codec_scheduler.py",
        ["tests/test_codec_scheduler.py", "tests/test_codec_scheduler_edges.py"],
    ),
    "manifest": ("omnicli/manifest.py", ["tests/test_manifest.py", "tests/test_manifest_edges.py"]),
    "normalize": ("omnicli/evaluation/normalize.py", ["tests/test_eval_scoring.py", "tests/test_wer_oracle.py"]),
    "wer": ("omnicli/evaluation/wer.py", ["tests/test_eval_scoring.py", "tests/test_wer_oracle.py"]),
    "metrics": ("omnicli/benchmark/metrics.py", ["tests/test_bench_metrics.py", "tests/test_bench_metrics_edges.py"]),
    "records": (
        "omnicli/driver/records.py",
        ["tests/test_bench_metrics.py", "tests/test_bench_metrics_edges.py", "tests/test_synth_driver.py"],
    ),
    "atomic": ("omnicli/atomic.py", ["tests/test_atomic.py", "tests/test_shard.py"]),
    "profile_loader": ("omnicli/profile/loader.py", ["tests/test_profiles.py", "tests/test_profile_loader_edges.py"]),
    "shard": ("omnicli/synth/shard.py", ["tests/test_shard.py"]),
}

# Surviving mutants that do not change behaviour: mutant name -> why. They are left out
# of the score's denominator and listed in docs/testing.md.
EQUIVALENT: dict[str, str] = {
    "omnicli.evaluation.wer.x_aggregate__mutmut_23": "np.array of Python floats is float64 whatever dtype=None says",
    "omnicli.evaluation.wer.x_aggregate__mutmut_25": "np.array of Python floats is float64 without a dtype too",
    "omnicli.engine.codec_scheduler.xǁCodecSchedulerǁ_candidates__mutmut_36": (
        "free + len(starting) for free - len(starting): they differ only when idle seekers outnumber the free "
        "slots left, and then runnable + could_join already equals num_slots >= min_batch: the same decision"
    ),
    "omnicli.engine.codec_scheduler.xǁCodecSchedulerǁcomplete__mutmut_5": "in_flight None is as false as False (only tested for truth)",
    "omnicli.driver.records.x_audio_underrun__mutmut_14": "t >= cursor for t > cursor: at t == cursor both add a zero gap and move the cursor to cursor + d",
    "omnicli.synth.shard.x_shard_of__mutmut_5": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.synth.shard.x_shard_of__mutmut_10": "int.from_bytes is big-endian by default since Python 3.11",
    "omnicli.synth.shard.x_recorded_shard__mutmut_6": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.synth.shard.xǁShardSpecǁparse__mutmut_3": (
        "rpartition for partition: they differ only with two slashes, and then either side is not a whole number: "
        "the same error"
    ),
    "omnicli.benchmark.metrics.x_detailed_lists__mutmut_27": "min()'s default is only used for an empty round, whose t0 is never read",
    "omnicli.benchmark.metrics.x_detailed_lists__mutmut_30": "min()'s default is only used for an empty round, whose t0 is never read",
    "omnicli.benchmark.metrics.x_distribution__mutmut_5": "the values times a float scale are float64 whatever the array's own dtype",
    "omnicli.benchmark.metrics.x_distribution__mutmut_7": "the values times a float scale are float64 whatever the array's own dtype",
    "omnicli.manifest.x__parse_jsonl__mutmut_33": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x__parse_jsonl__mutmut_35": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x__parse_jsonl__mutmut_50": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x__parse_jsonl__mutmut_52": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x__parse_jsonl__mutmut_61": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x__parse_jsonl__mutmut_63": 'a missing key\'s default, None or "", becomes "" through the `or ""` that follows',
    "omnicli.manifest.x_check_utt_id__mutmut_6": "'.' also starts with '.', which the same line refuses",
    "omnicli.manifest.x_check_utt_id__mutmut_7": "'..' also starts with '.', which the same line refuses",
    "omnicli.manifest.x_read_manifest__mutmut_45": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.manifest.x_read_manifest__mutmut_53": "rstrip() for rstrip('\\r\\n'): every field is stripped and JSON ignores trailing blanks",
    "omnicli.manifest.x_read_manifest__mutmut_54": "a line break left at the end is stripped with the last field (or ignored by JSON)",
    "omnicli.manifest.x_read_manifest__mutmut_111": "must_exist None is as false as False",
    "omnicli.manifest.x_resolve_audio_path__mutmut_10": "base / an absolute path is that absolute path",
    "omnicli.atomic.x_write_json_atomic__mutmut_8": "ensure_ascii=None is as false as False to json.dumps",
    "omnicli.atomic.xǁJsonlAppenderǁappend__mutmut_5": "ensure_ascii=None is as false as False to json.dumps",
    "omnicli.atomic.x_iter_jsonl__mutmut_13": "`return` for `break` as the loop's last act: the generator ends either way",
    "omnicli.atomic.x_write_text_atomic__mutmut_7": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.atomic.xǁJsonlAppenderǁappend__mutmut_12": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.atomic.xǁJsonlAppenderǁ__init____mutmut_9": "needs_newline None is as false as False (only tested for truth)",
    "omnicli.atomic.xǁJsonlAppenderǁ__init____mutmut_27": "read(None) at one byte before the end reads that one byte, as read(1)",
    "omnicli.atomic.xǁJsonlAppenderǁ__init____mutmut_28": "read(2) at one byte before the end reads that one byte, as read(1)",
    "omnicli.profile.loader.x__read_yaml__mutmut_4": "'UTF-8' and 'utf-8' name the same codec",
    "omnicli.profile.loader.x__read_yaml__mutmut_11": "yaml.compose's default Loader has the same resolver as SafeLoader: the same nodes, so the same line index",
    "omnicli.profile.loader.x__format_error__mutmut_23": "no setting is a list of lists, so an error's location holds at most one index and the joiner is never used",
    "omnicli.profile.loader.x__format_error__mutmut_53": "no setting is required (all have defaults), so pydantic never reports 'missing'",
    "omnicli.profile.loader.x__format_error__mutmut_54": "no setting is required (all have defaults), so pydantic never reports 'missing'",
    "omnicli.profile.loader.x__format_error__mutmut_55": "unknown keys are refused before validation, so pydantic never reports 'extra_forbidden'",
    "omnicli.profile.loader.x__format_error__mutmut_56": "unknown keys are refused before validation, so pydantic never reports 'extra_forbidden'",
    "omnicli.profile.loader.x__normalize__mutmut_87": "an overlay that sets device is already an error, and the load stops before the overlay is used",
    "omnicli.profile.loader.x__normalize__mutmut_88": "an overlay that sets device is already an error, and the load stops before the overlay is used",
    "omnicli.profile.loader.x__normalize__mutmut_98": "allow_meta None is as false as False (only tested for truth)",
    "omnicli.profile.loader.x__unknown_key__mutmut_26": "get_close_matches returns the best match first, so close[0] is the same for n=3 as for n=1",
    "omnicli.profile.loader.x__unknown_key__mutmut_29": "get_close_matches returns the best match first, so close[0] is the same for n=2 as for n=1",
    "omnicli.profile.loader.x_load_profile__mutmut_39": "a missing device defaults to something that is not cpu or cuda either way: the platform is detected",
    "omnicli.profile.loader.x_load_profile__mutmut_41": "a missing device defaults to something that is not cpu or cuda either way: the platform is detected",
    "omnicli.profile.loader.x_load_profile__mutmut_44": "a missing device defaults to something that is not cpu or cuda either way: the platform is detected",
    "omnicli.profile.loader.x_load_profile__mutmut_45": "a missing device defaults to something that is not cpu or cuda either way: the platform is detected",
    "omnicli.profile.loader.x_load_profile__mutmut_60": "the platforms.* locations left behind are never looked up: origins are read for schema keys and errors name schema keys",
    "omnicli.profile.loader.x_load_profile__mutmut_61": "the platforms.* locations left behind are never looked up: origins are read for schema keys and errors name schema keys",
    "omnicli.profile.loader.x_load_profile__mutmut_74": "every leaf of the chosen overlay was recorded with a location when its file was merged, so the default is never used",
    "omnicli.profile.loader.x_load_profile__mutmut_76": "every leaf of the chosen overlay was recorded with a location when its file was merged, so the default is never used",
    "omnicli.profile.loader.x_load_profile__mutmut_91": "the values check_platform refuses (v2, triton) are never defaults, so their key always has a recorded location",
    "omnicli.profile.loader.x_load_profile__mutmut_93": "the values check_platform refuses (v2, triton) are never defaults, so their key always has a recorded location",
    "omnicli.profile.loader.x__apply_set__mutmut_14": "the value was just parsed from the --set string and nothing else holds it: a shallow copy is as good",
    "omnicli.profile.loader.xǁ_Treeǁ_merge__mutmut_22": "nothing reads a merged layer again, so sharing its nested values with the tree changes no result",
    "omnicli.profile.loader.xǁ_Treeǁforget__mutmut_5": "stale locations below a key that now holds a scalar are never looked up: errors are reported at schema keys, which have nothing below a scalar",
}

KILLED = {"killed", "timeout"}  # a mutant that makes a test hang is caught too


def scratch_copy(module: str) -> Path:
    """A copy of the tracked (and new, not ignored) files the tests need."""
    work = SCRATCH / module
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "omnicli", "tests", "datasets", "docs", "pyproject.toml"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout.splitlines()
    for name in listed:
        source = REPO / name
        if source.is_file():
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return work


def write_config(work: Path, source: str, tests: list[str]) -> None:
    # forkserver: torch (imported by some test modules) is not fork-safe after use
    lines = [
        "[mutmut]",
        "source_paths=omnicli",
        f"only_mutate={source}",
        "pytest_add_cli_args_test_selection=",
        *[f"    {t}" for t in tests],
        "pytest_add_cli_args=",
        "    -p",
        "    no:cacheprovider",
        "also_copy=",  # mutmut copies tests/ itself; the demo set and the docs some tests read (presets are under omnicli/data)
        "    datasets",
        "    docs",
        "process_isolation=forkserver",
        "forkserver_warmup=collect",
        "use_git_change_detection=false",
    ]
    (work / "setup.cfg").write_text("\n".join(lines) + "\n")


def mutmut(work: Path, *args: str, check: bool = True) -> str:
    env = {**os.environ, "PYTHONPATH": "", "COLUMNS": "200", "OMNI_CACHE_DIR": str(REPO / ".cache" / "omni-test")}
    done = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=work, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed in {work}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def statuses(work: Path) -> dict[str, str]:
    out = mutmut(work, "results", "--all", "true")
    found = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+__mutmut_\d+): (.+)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def diff_of(work: Path, mutant: str) -> str:
    shown = mutmut(work, "show", mutant, check=False)
    return "\n".join(
        line for line in shown.splitlines() if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    )


def run_module(module: str, jobs: int, show: bool) -> dict:
    source, tests = MODULES[module]
    work = scratch_copy(module)
    write_config(work, source, tests)
    run = mutmut(work, "run", "--max-children", str(jobs), check=False)
    found = statuses(work)
    if not found or all(s == "not checked" for s in found.values()):
        # usually the tests fail on the unmutated copy (a file they read was not copied)
        raise SystemExit(f"{module}: mutmut tested no mutant (see {work}):\n{run[-3000:]}")
    killed = sorted(m for m, s in found.items() if s in KILLED)
    equivalent = sorted(m for m, s in found.items() if s not in KILLED and m in EQUIVALENT)
    alive = sorted(m for m, s in found.items() if s not in KILLED and m not in EQUIVALENT)
    counted = len(found) - len(equivalent)
    result = {
        "module": module,
        "source": source,
        "mutants": len(found),
        "killed": len(killed),
        "equivalent": len(equivalent),
        "survived": len(alive),
        "score": round(100.0 * len(killed) / counted, 1) if counted else 100.0,
        "survivors": {m: {"status": found[m], "diff": diff_of(work, m) if show else ""} for m in alive},
    }
    (work / "score.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help=f"modules to test (default: all of {', '.join(MODULES)})")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--target", type=float, default=90.0, help="lowest acceptable score in percent")
    parser.add_argument("--show", action="store_true", help="print the diff of every surviving mutant")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    results = [run_module(m, args.jobs, args.show) for m in (args.modules or list(MODULES))]
    print(f"{'module':<18} {'mutants':>7} {'killed':>7} {'equiv.':>7} {'survived':>8} {'score':>7}")
    for r in results:
        print(
            f"{r['module']:<18} {r['mutants']:>7} {r['killed']:>7} {r['equivalent']:>7} {r['survived']:>8} {r['score']:>6.1f}%"
        )
    for r in results:
        for name, info in r["survivors"].items():
            print(f"\n{r['module']}: {name} ({info['status']})")
            if info["diff"]:
                print(info["diff"])
    return 0 if all(r["score"] >= args.target for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
