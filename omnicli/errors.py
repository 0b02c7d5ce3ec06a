"""The toolkit's exception bases: each carries the exit code the CLI ends with.

    UsageError (2)     bad input: a profile, a manifest, an option, a missing model
    EngineFailure (3)  the engine could not start or died
    OutputError (4)    a result could not be written

A command lets these propagate; `omnicli.cli` prints the one-line message
and exits with `exit_code`.
"""

from __future__ import annotations

EXIT_USAGE = 2
EXIT_ENGINE = 3
EXIT_OUTPUT = 4


class OmniError(Exception):
    exit_code: int = 1
    headline: str = "error"  # printed in red before the message: `error: ...`
    message_below: bool = False  # a message of several lines goes below the headline, as written


class UsageError(OmniError):
    exit_code = EXIT_USAGE


class EngineFailure(OmniError):
    exit_code = EXIT_ENGINE


class OutputError(OmniError):
    exit_code = EXIT_OUTPUT
