"""Options and helpers shared by every command.

Chatter and progress always go to stderr (stdout keeps results), through the
consoles of `omnicli.runtime.console`:
- `progress_bar`: Rich's live bar on a terminal, plain lines every few
  seconds without one (`omnicli.commands.progress`), nothing with --quiet;
  `RequestProgress` is the one progress observer of the commands that drive
  requests;
- `note` / `status`: status lines and spinners, silent with --quiet;
- `--verbose`: the library's INFO logs too (engine start-up, ASR loading).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from omnicli.commands.progress import PlainProgress
from omnicli.errors import OmniError, UsageError
from omnicli.runtime.console import VERBOSITY, err_console

if TYPE_CHECKING:
    from rich.progress import TaskID

    from omnicli.profile import ResolvedProfile

ProfileOption = Annotated[
    Optional[str],
    typer.Option(
        "--profile",
        "-p",
        help="Preset name (see `omni profiles list`) or path to a YAML file.",
        show_default="default",
    ),
]
SetOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--set",
        "-s",
        help="Override one profile key, e.g. --set codec.max_num_seqs=32 (repeatable).",
    ),
]


QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress or notes: only warnings, errors and results.")
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also print the library's INFO logs (engine start-up, ASR loading).")
]


def resolve_profile(profile: str | None, sets: list[str] | None, platform: str | None = None) -> ResolvedProfile:
    """Load and validate a profile, then check its family can run here.

    ProfileError, FamilyUnavailable and CheckpointMissing are usage errors
    (exit 2): they are found before any engine starts. `platform`
    ('cpu'/'cuda') resolves it for the machine the engine runs on when that
    is not this one (`--ray`); by default this machine's is detected."""
    from omnicli.families import check_available, check_checkpoints
    from omnicli.profile import load_profile

    resolved = load_profile(profile, overrides=sets or [], platform=platform)
    p = resolved.profile
    check_available(p.model)
    check_checkpoints(p.model, p.model_path, p.codec_path, p.model_options)
    return resolved


def print_error(exc: OmniError) -> None:
    """The one report of an error that ends a command (omnicli.cli calls it)."""
    style, headline = exc.headline_style, escape(exc.headline)  # a headline may name a file: [x].yaml
    if exc.message_below:
        err_console.print(f"[{style}]{headline}:[/{style}]", highlight=False)
        err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
    else:  # escaped: a message may quote brackets (pip install 'omnicli[ray]')
        err_console.print(f"[{style}]{headline}:[/{style}] {escape(str(exc))}", highlight=False)


def require_folder(path: Path | None, option: str) -> None:
    """Exit 2 with one line when an output folder option names a file (or lies
    under one), before any work is done, instead of failing at the end with
    `[Errno 17] File exists`."""
    if path is None:
        return
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "" if probe == Path(path) else f" ({probe} is a file)"
        raise UsageError(f"{option} {path}: not a folder{where}; give a folder (it is created when missing)")


def progress_bar(out: Console, *extra: ProgressColumn, failed_label: str = "failed") -> Progress:
    """The progress every command shows: description, bar, done/total, failures, `extra`, times.

    A live bar when `out` is a terminal, plain lines without one, nothing
    with --quiet. Tasks need a `failed` field (`progress.add_task(..., failed=0)`).
    """
    columns = (
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"[red]{{task.fields[failed]}} {failed_label}"),
        *extra,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    if VERBOSITY.quiet:
        return Progress(*columns, console=out, disable=True)
    if out.is_terminal:
        return Progress(*columns, console=out)
    return PlainProgress(*columns, console=out)


class RequestProgress:
    """The one progress observer of the commands that drive requests (synth, bench).

    A bar per phase (`start` ... `end`) counting finished requests and
    failures, with audio-s/s when `rate` is set; `note` prints above it.
    """

    def __init__(self, out: Console = err_console, *, rate: bool = False):
        extra = (TextColumn("{task.fields[rate]:.2f} audio-s/s"),) if rate else ()
        self.bar = progress_bar(out, *extra)
        self._task: TaskID | None = None
        self._failed = 0
        self._audio_s = 0.0

    def __enter__(self) -> RequestProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def start(self, description: str, total: int) -> None:
        self._failed, self._audio_s = 0, 0.0
        self._task = self.bar.add_task(description, total=total, failed=0, rate=0.0)

    def done(self, *, failed: bool, audio_seconds: float = 0.0) -> None:
        if self._task is None:
            return
        self._failed += bool(failed)
        self._audio_s += audio_seconds
        task = next(t for t in self.bar.tasks if t.id == self._task)
        elapsed = task.elapsed or 1e-9
        self.bar.update(self._task, advance=1, failed=self._failed, rate=self._audio_s / elapsed)

    def end(self) -> None:
        if self._task is not None:
            self.bar.stop_task(self._task)  # without a terminal: the phase's last line now
        self._task = None

    def note(self, message: str) -> None:
        """A line above the bar (a failed row, a retention error): printed even with --quiet."""
        self.bar.console.print(message, highlight=False)

    def stop(self) -> None:
        """Restores the terminal (before a forced exit)."""
        self.bar.stop()
