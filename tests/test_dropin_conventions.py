"""Issue 32 item 9: small command-line conventions of `omni bench` (the bare --profile: test_dropin_flags.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from omnicli.benchmark.vllm_format import METRIC_NAMES
from omnicli.cli import app

runner = CliRunner()


def _help() -> str:
    result = runner.invoke(app, ["bench", "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def test_percentile_metrics_help_names_every_accepted_metric():
    words = "".join(_help().split())  # wrapping-proof
    listed = words.split("--percentile-metrics", 1)[1].split("anyof:", 1)[1].split(".", 1)[0]
    assert listed.split(",") == list(METRIC_NAMES)


def test_metadata_help_shows_vllms_several_pairs_form():
    assert "--metadata version=0.3 tp=1" in " ".join(_help().split())


def test_bench_help_off_a_terminal_is_plain_text_as_the_top_level_help():
    text = _help()  # CliRunner's streams are not terminals
    top = runner.invoke(app, ["--help"]).output
    for output in (text, top):
        assert output.startswith("Usage: ")
        assert not any(c in output for c in "╭╮╰╯│─"), output[:400]
