"""Options and helpers shared by every command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console()
err_console = Console(stderr=True)

# Exit codes (documented in README): 0 all good, 1 some rows/requests failed,
# 2 bad usage or input (typer's own), 3 the engine could not start or died,
# 130 interrupted by Ctrl-C / SIGTERM.
EXIT_OK = 0
EXIT_SOME_FAILED = 1
EXIT_USAGE = 2
EXIT_ENGINE = 3
EXIT_INTERRUPTED = 130

ProfileOption = Annotated[
    Optional[str],
    typer.Option(
        "--profile",
        "-p",
        help="Profile name (profiles/NAME.yaml, see `omni profiles list`) or path to a YAML file.",
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


def resolve_profile(profile: str | None, sets: list[str] | None):
    """Load and validate a profile, turning errors into a clean usage exit."""
    from omnicli.profile import ProfileError, load_profile

    try:
        resolved = load_profile(profile, overrides=sets or [])
    except ProfileError as exc:
        err_console.print(f"[red]profile error:[/red] {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    p = resolved.profile
    if p.model != "omni-tiny":  # omni-tiny builds itself; the others must be on disk
        from omnicli.engine.models import check_checkpoints
        from omnicli.engine.models.checkpoints import CheckpointMissing

        try:  # before any engine starts: a missing checkpoint is bad usage, not an engine failure
            check_checkpoints(p.model, p.model_path, p.codec_path)
        except CheckpointMissing as exc:
            err_console.print("[red]checkpoint missing:[/red]")
            err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None
    return resolved


def progress_bar(out: Console, *extra: ProgressColumn, failed_label: str = "failed") -> Progress:
    """The progress bar every command shows: description, bar, done/total, failures, `extra`, times.

    Tasks need a `failed` field (`progress.add_task(..., failed=0)`).
    """
    return Progress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"[red]{{task.fields[failed]}} {failed_label}"),
        *extra,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
    )


class RequestProgress:
    """The one progress observer of the commands that drive requests (synth, bench).

    A bar per phase (`start` ... `end`) counting finished requests and
    failures, with audio-s/s when `rate` is set; `note` prints above it.
    """

    def __init__(self, out: Console, *, rate: bool = False):
        extra = (TextColumn("{task.fields[rate]:.2f} audio-s/s"),) if rate else ()
        self.bar = progress_bar(out, *extra)
        self._task = None
        self._failed = 0
        self._audio_s = 0.0

    def __enter__(self) -> RequestProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
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
        self._task = None

    def note(self, message: str) -> None:
        self.bar.console.print(message, highlight=False)

    def stop(self) -> None:
        """Restores the terminal (before a forced exit)."""
        self.bar.stop()


def fmt_number(value, digits: int = 2) -> str:
    """A table cell: '-' for no value, on/off for flags, floats with `digits` decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)
