"""Exceptions carry their exit code: the one handler in omnicli.cli prints the message and exits with it."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from omnicli.checkpoints import CheckpointMissing
from omnicli.cli import OmniGroup
from omnicli.engine.request import EngineError
from omnicli.errors import EngineFailure, OutputError, UsageError
from omnicli.manifest import ManifestError
from omnicli.profile import ProfileError
from omnicli.synth.sink import OutputUnwritable

runner = CliRunner()


def _app_raising(exc: Exception) -> typer.Typer:
    app = typer.Typer(cls=OmniGroup)

    @app.command()
    def boom() -> None:
        raise exc

    @app.command()
    def other() -> None:  # two commands, so `boom` is a subcommand as in `omni`
        pass

    return app


@pytest.mark.parametrize(("exc", "code", "shown"), [
    (ManifestError("m.lst:3: no text [bad]"), 2, "error: m.lst:3: no text [bad]"),
    (ProfileError("--set talker.x: unknown key"), 2, "profile error: --set talker.x: unknown key"),
    (EngineError("engine failed to start: boom"), 3, "error: engine failed to start: boom"),
    (OutputUnwritable("cannot write OUT"), 4, "error: cannot write OUT"),
])
def test_the_handler_prints_one_line_and_exits_with_the_code(exc, code, shown):
    result = runner.invoke(_app_raising(exc), ["boom"])
    assert result.exit_code == code
    assert result.output.splitlines() == [shown]


def test_a_message_of_several_lines_goes_below_its_headline():
    result = runner.invoke(_app_raising(CheckpointMissing("talker: not in /a\ncodec: not in /b")), ["boom"])
    assert result.exit_code == 2
    assert result.output.splitlines() == ["checkpoint missing:", "talker: not in /a", "codec: not in /b"]


def test_the_error_classes_have_their_base():
    assert issubclass(ManifestError, UsageError) and issubclass(ManifestError, ValueError)
    assert issubclass(EngineError, EngineFailure) and issubclass(OutputUnwritable, OutputError)
    assert issubclass(OutputUnwritable, OSError)  # callers still catch it as an OSError


def test_other_exceptions_are_not_swallowed():
    result = runner.invoke(_app_raising(KeyError("x")), ["boom"])
    assert isinstance(result.exception, KeyError)
