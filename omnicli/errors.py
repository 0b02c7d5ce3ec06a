"""The exit codes of every command (README's table), and the exception bases that carry them.

    EXIT_OK (0)            every row or request succeeded
    EXIT_SOME_FAILED (1)   some rows or requests failed (their results are written)
    UsageError (2)         bad input: a profile, a manifest, an option, a missing model
    EngineFailure (3)      the engine could not start or died
    OutputError (4)        a result could not be written (disk full, I/O error): stopped, work left pending
    EXIT_INTERRUPTED (130) Ctrl-C, SIGTERM or SIGHUP: finished work kept

A command lets the exceptions propagate; `omnicli.cli` prints the one-line
message and exits with `exit_code`. A finished run's outcome object
(`SynthReport`, `BenchOutcome`, `EvalReport`, ...) says its own `exit_code`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
EXIT_ENGINE = 3
EXIT_OUTPUT = 4
EXIT_INTERRUPTED = 130


class OmniError(Exception):
    exit_code: int = 1
    headline: str = "error"  # printed before the message: `error: ...`
    headline_style: str = "red"
    message_below: bool = False  # a message of several lines goes below the headline, as written


class UsageError(OmniError):
    exit_code = EXIT_USAGE


class EngineFailure(OmniError):
    exit_code = EXIT_ENGINE


class OutputError(OmniError):
    exit_code = EXIT_OUTPUT


class Interrupted(OmniError):
    """Ctrl-C, SIGTERM or SIGHUP ended the command; the message says what was kept."""

    exit_code = EXIT_INTERRUPTED
    headline = "interrupted"
    headline_style = "yellow"
