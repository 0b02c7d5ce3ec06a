"""CLI conventions: -h, completion, env vars in --help, --version/env, --quiet/--verbose, progress without
a terminal."""

from __future__ import annotations

import importlib.metadata
import io
import json

import pytest
import typer
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

import omnicli
from omnicli.cli import app
from omnicli.commands import common
from omnicli.commands.progress import PlainProgress
from omnicli.runtime import console as console_module

runner = CliRunner()
LONG_COMMANDS = ("synth", "bench", "eval-wer")


def _command(*path: str):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize(
    "args", [[], ["synth"], ["bench"], ["eval-wer"], ["profiles", "list"], ["models"], ["datasets", "path"], ["env"]]
)
def test_dash_h_is_help(args):
    short, long = runner.invoke(app, [*args, "-h"]), runner.invoke(app, [*args, "--help"])
    assert short.exit_code == long.exit_code == 0, short.output
    assert "Usage" in short.output and short.output == long.output


def test_shell_completion_is_enabled():
    names = {opt for p in _command().params for opt in p.opts}
    assert {"--install-completion", "--show-completion"} <= names


@pytest.mark.parametrize("name", LONG_COMMANDS)
def test_options_with_environment_variables_declare_them(name, monkeypatch, tmp_path):
    params = {p.name: p for p in _command(name).params}
    keep = params["keep_failed"]
    assert keep.envvar == "OMNI_FAILED_SPEECH_AUDIO_DIR" and keep.show_envvar
    # the variable fills the option when the flag is absent
    monkeypatch.setenv("OMNI_FAILED_SPEECH_AUDIO_DIR", str(tmp_path))
    ctx = _command(name).make_context(
        name, ["--demo"] if name == "synth" else ["x", "-m", "y"] if name == "eval-wer" else []
    )
    assert str(ctx.params["keep_failed"]) == str(tmp_path)


@pytest.mark.parametrize("name", LONG_COMMANDS)
def test_long_commands_have_quiet_and_verbose(name):
    opts = {opt for p in _command(name).params for opt in p.opts}
    assert {"--quiet", "-q", "--verbose", "-v"} <= opts
    both = runner.invoke(
        app,
        [name, "--quiet", "--verbose"]
        + (["--demo"] if name == "synth" else ["g", "-m", "m"] if name == "eval-wer" else []),
    )
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_version_names_torch_vllm_and_device():
    result = runner.invoke(app, ["--version"])
    lines = result.output.splitlines()
    assert result.exit_code == 0 and lines[0] == f"omni {omnicli.__version__}"
    assert lines[1] == f"torch {importlib.metadata.version('torch')}"
    assert lines[2].startswith("vllm ") and lines[2] != "vllm not installed"
    assert lines[3].startswith("device cpu") or lines[3].startswith("device cuda")


def test_env_prints_what_a_bug_report_needs(monkeypatch):
    monkeypatch.setenv("OMNI_PROFILES_DIR", "/nowhere")
    facts = json.loads(runner.invoke(app, ["env", "--json"]).output)
    assert facts["packages"]["torch"] == importlib.metadata.version("torch")
    assert facts["env"]["OMNI_PROFILES_DIR"] == "/nowhere" and facts["profiles_dir"] == "/nowhere"
    assert {"device", "python", "platform", "cache_dir", "demo_manifest", "asr_backends"} <= set(facts)
    text = runner.invoke(app, ["env"]).output
    assert "packages:" in text and f"  torch: {facts['packages']['torch']}" in text


def test_progress_without_a_terminal_is_plain_lines(monkeypatch):
    sink = io.StringIO()
    monkeypatch.setattr(console_module.VERBOSITY, "quiet", False)
    observer = common.RequestProgress(Console(file=sink, force_terminal=False), rate=True)
    assert isinstance(observer.bar, PlainProgress)
    observer.bar.interval = 0.0  # every update prints; the default is a line every few seconds
    with observer:
        observer.start("warmup", 1)
        observer.done(failed=False, audio_seconds=1.0)
        observer.end()
        observer.start("synth", 3)
        observer.done(failed=False, audio_seconds=1.5)
        observer.done(failed=True)
        observer.done(failed=False, audio_seconds=0.75)
        observer.end()
    lines = sink.getvalue().splitlines()
    synth = [line for line in lines if line.startswith("synth: ")]
    assert synth[0].startswith("synth: 1/3 done, 0 failed, ") and " audio-s/s, " in synth[0]
    assert synth[-1].startswith("synth: 3/3 done, 1 failed, ") and synth[-1].endswith("s elapsed")
    # a phase's last line comes when it ends, before the next phase's lines
    assert lines.index(next(line for line in lines if line.startswith("warmup: 1/1 done"))) < lines.index(synth[0])
    assert not any("\x1b" in line or "━" in line for line in lines)


def test_progress_interval_throttles_and_quiet_disables(monkeypatch):
    sink = io.StringIO()
    bar = PlainProgress(console=Console(file=sink), interval=3600)
    with bar:
        task = bar.add_task("bench", total=10, failed=0)
        for _ in range(10):
            bar.update(task, advance=1)
    assert sink.getvalue().splitlines() == [
        line for line in sink.getvalue().splitlines() if "10/10" in line
    ]  # only the last
    monkeypatch.setattr(console_module.VERBOSITY, "quiet", True)
    assert common.progress_bar(Console(file=io.StringIO())).disable
    monkeypatch.setattr(console_module.VERBOSITY, "quiet", False)
    terminal = common.progress_bar(Console(file=io.StringIO(), force_terminal=True))
    assert type(terminal) is Progress and not terminal.disable
