"""`omni bench` outputs: every path it will write is checked before the engine starts, an
--audio-out that fails while running stops the run with exit 4, and --eval never scores a
pass whose clips are not all there (the real command in-process, a fake engine of this
component; disk faults on real tiny filesystems)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import omnicli.benchmark.entrypoint as bench_entry
from omnicli.benchmark.audio_out import RoundOutputs
from omnicli.benchmark.entrypoint import BenchRunObserver, score_passes
from omnicli.cli import app
from tests.conftest import fill_up
from tests.fakes import FakeEngine

runner = CliRunner()


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def engines(monkeypatch):
    started = []

    async def start(resolved):
        started.append(FakeEngine(samples=30_000))  # 3 chunks: 90,000 16-bit samples, ~180 KB a wav
        return started[-1]

    monkeypatch.setattr(bench_entry, "start_engine", start)
    return started


def test_unwritable_result_paths_exit_2_before_the_engine_starts(tmp_path, engines, read_only):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    cases = [
        (
            ["--result-dir", str(read_only / "results")],
            f"--result-dir: cannot write into {read_only / 'results'}: Read-only file system",
        ),
        (
            ["--save-result", "--result-dir", str(read_only)],
            f"--save-result: cannot write into {read_only}: Read-only file system",
        ),
        (["--csv", str(a_file / "r.csv")], f"--csv: cannot write into {a_file}: {a_file} is not a folder"),
        (["--csv", str(read_only / "r.csv")], f"--csv: cannot write into {read_only}: Read-only file system"),
        (["--plot", str(tmp_path)], f"--plot {tmp_path}: is a folder; give a file name"),
        (["--plot", str(read_only / "p.png")], f"--plot: cannot write into {read_only}: Read-only file system"),
        (
            ["--audio-out", str(read_only / "wavs")],
            f"--audio-out: cannot write into {read_only / 'wavs'}: Read-only file system",
        ),
    ]
    for options, message in cases:
        result = runner.invoke(app, ["bench", "-n", "2", *options])
        # was: the whole benchmark ran, then a traceback and exit 1, the figures lost
        assert result.exit_code == 2, (options, result.output)
        assert message in words(result.output), (options, result.output)
    assert engines == []  # no engine was started for any of them


def test_a_full_audio_out_exits_2_at_once(small_fs, engines):
    fill_up(small_fs)
    result = runner.invoke(app, ["bench", "-n", "2", "--audio-out", str(small_fs / "wavs")])
    assert (
        result.exit_code == 2
        and "--audio-out: cannot write into" in words(result.output)
        and "No space left" in result.output
    )
    assert engines == []


def test_an_audio_out_that_fills_up_while_running_stops_the_run_with_exit_4(tmp_path, small_fs, engines):
    result = runner.invoke(app, ["bench", "-c", "1,2", "-n", "4", "--audio-out", str(small_fs / "wavs"),
                                 "--result-dir", str(tmp_path), "--result-filename", "r.json"])
    text = words(result.output)
    # was: exit 0 with a warning per clip, every pass run, the audio of most clips missing
    assert result.exit_code == 4, text
    assert "No space left on device" in text and "stopped, 1 completed pass(es) reported" in text
    (engine,) = engines
    assert not any("-c2-" in request_id for request_id in engine.seen)  # no work admitted after the failure
    assert engine.closed
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["default/c1"]


def test_eval_never_scores_a_pass_with_clips_missing(tmp_path):
    outputs = RoundOutputs(tmp_path / "wavs", None, one_pass=False)
    run, shapes = SimpleNamespace(label="a", profile=None), [SimpleNamespace(label="c1"), SimpleNamespace(label="c2")]
    results = [SimpleNamespace(profile=run, shape=shape, label=f"a/{shape.label}") for shape in shapes]
    outputs.unwritten[outputs.pass_dir(run, shapes[1])] = 2  # e.g. two wav names that were folders
    scored = []

    class Scorer:
        metrics = ("wer",)

        def score_pass(self, folder, prompts, profile):
            scored.append(folder)
            return {"metrics": ["wer"], "seed_wer_mean": 0.1}

    report = SimpleNamespace(extras={})
    score_passes(Scorer(), results, outputs, [], report, BenchRunObserver())
    assert scored == [outputs.pass_dir(run, shapes[0])]
    assert (
        report.extras["a/c2"]["eval"]["error"]
        == f"2 clip(s) could not be written to {outputs.pass_dir(run, shapes[1])}: not scored"
    )


def test_the_write_check_leaves_nothing_behind(tmp_path):
    from omnicli.atomic import folder_write_error

    assert folder_write_error(tmp_path / "new" / "folder") is None
    assert list((tmp_path / "new" / "folder").iterdir()) == []  # created, and the probe removed
