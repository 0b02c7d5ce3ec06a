"""Output never depends on the terminal: no line written to a file or pipe is wrapped,
whatever COLUMNS says and however long the paths are (tests run under a long --basetemp)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from rich.table import Table
from typer.testing import CliRunner

import omnicli
from omnicli.cli import app
from omnicli.runtime import console as console_module
from tests.conftest import omni_cli

runner = CliRunner()
NARROW = {"COLUMNS": "20", "LINES": "5"}
LONG_NAME = "a-folder-name-long-enough-to-overflow-any-terminal-" + "x" * 120


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _deep(tmp_path: Path) -> Path:
    folder = tmp_path / LONG_NAME / LONG_NAME
    folder.mkdir(parents=True)
    return folder


def test_console_does_not_wrap_a_pipe_whatever_columns_says(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")  # Rich reads it when a console is made
    path = "/" + "/".join([LONG_NAME] * 3) + "/meta.lst:7: bad row"
    pipe = io.StringIO()
    console_module.CliConsole(file=pipe).print(f"[red]error:[/red] {path}")
    assert pipe.getvalue() == f"error: {path}\n"


def test_console_still_wraps_on_a_terminal(monkeypatch):
    # The exception is deliberate: on a real terminal, lines fit the window.
    monkeypatch.setenv("COLUMNS", "20")
    tty = _Terminal()
    console_module.CliConsole(file=tty, color_system=None).print("word " * 20)
    assert max(len(line) for line in tty.getvalue().splitlines()) <= 20


def test_tables_keep_their_natural_width_in_a_pipe(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    table = Table("name", "path")
    table.add_row("x", "/" + LONG_NAME)
    pipe = io.StringIO()
    console_module.CliConsole(file=pipe).print(table)
    assert any("/" + LONG_NAME in line for line in pipe.getvalue().splitlines())
    assert max(len(line) for line in pipe.getvalue().splitlines()) < len(LONG_NAME) + 20


def test_every_console_of_the_cli_is_width_independent():
    cli_console = console_module.CliConsole
    assert isinstance(console_module.console, cli_console) and isinstance(console_module.err_console, cli_console)
    assert console_module.err_console.stderr and not console_module.console.stderr
    # A plain rich Console made anywhere else would bring COLUMNS back in.
    offenders = [
        str(path) for path in Path(omnicli.__file__).parent.rglob("*.py")
        if re.search(r"(?<![A-Za-z_])Console\(", path.read_text(encoding="utf-8")) and path.name != "console.py"
    ]
    assert offenders == []


def test_invalid_rows_are_one_line_each_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    folder = _deep(tmp_path)
    manifest = folder / "meta.lst"
    manifest.write_bytes(b"a|b|c\nu1|x|missing.wav|Text.\n")
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(folder / "out"), "--profile", "cpu"], env=NARROW)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(line.startswith(f"skipped {manifest}:1: expected") for line in lines), result.output
    assert any(f"{manifest}:2:" in line and "missing.wav" in line for line in lines), result.output


def test_usage_errors_are_one_plain_line_in_process(monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    result = runner.invoke(app, ["bench", "--metric-percentiles", "50,abc"], env=NARROW)
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for --metric-percentiles: percentile 'abc' is not a number" in result.output.splitlines()
    )


def test_cli_subprocess_at_narrow_columns_writes_whole_lines(tmp_path):
    """The real `python -m omnicli`, with stdout and stderr going to pipes and COLUMNS=20."""
    folder = _deep(tmp_path)
    manifest = folder / "meta.lst"
    manifest.write_text("only|two\nu1|x|missing.wav|Text.\n")
    bench = omni_cli("bench", str(manifest), env=NARROW, timeout=120)
    assert bench.returncode == 2, bench.stderr
    err = bench.stderr.splitlines()
    assert any(line.strip().startswith(f"{manifest}:1:") for line in err), bench.stderr
    assert any(f"{manifest}:2:" in line and "missing.wav" in line for line in err), bench.stderr

    bad_profile = folder / "bad.yaml"
    bad_profile.write_text("codec:\n  generation_min_batch_size: 0\n")
    validate = omni_cli("profiles", "validate", str(bad_profile), "--platform", "cpu", env=NARROW, timeout=120)
    assert validate.returncode == 2
    text = validate.stdout + validate.stderr
    shown = {str(bad_profile), os.path.relpath(bad_profile)}  # the command shortens paths under the working folder
    assert any(
        line.strip().startswith(tuple(f"{p}:2: codec.generation_min_batch_size" for p in shown))
        for line in text.splitlines()
    ), text


def test_help_is_readable_in_a_pipe():
    result = omni_cli("--help", env=NARROW, timeout=120)
    assert result.returncode == 0 and "synth" in result.stdout


def test_profiles_list_heading_is_one_line_in_a_pipe(tmp_path, monkeypatch):
    folder = _deep(tmp_path)
    for preset in (Path(omnicli.__file__).parent / "data" / "profiles").glob("*.yaml"):
        (folder / preset.name).write_bytes(preset.read_bytes())
    monkeypatch.setenv("OMNI_PROFILES_DIR", str(folder))
    result = runner.invoke(app, ["profiles", "list"], env=NARROW)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"Profiles in {folder}"


def test_synth_heading_and_results_line_are_one_line_each_in_a_pipe(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    folder = _deep(tmp_path)
    manifest, out = folder / "meta.lst", folder / "out"
    manifest.write_text("only|two|fields\n")  # nothing valid: the summary without an engine
    result = runner.invoke(app, ["synth", str(manifest), "--out", str(out), "--profile", "cpu"], env=NARROW)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert f"omni synth -> {out}" in lines, result.output
    assert f"results: {out / 'results.jsonl'}  summary: {out / 'summary.json'}" in lines, result.output
