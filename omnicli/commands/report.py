"""`omni report`: one HTML page of synth, eval and bench results (parse, call omnicli.report, print).

`--report FILE` on synth, bench and eval calls `report_after_run` with the
folders the run wrote; `check_report_option` refuses it before any work when
the report extra is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from omnicli.errors import OutputError, UsageError
from omnicli.runtime.console import err_console, note

if TYPE_CHECKING:
    from omnicli.report.page import PageFacts

ReportOption = Annotated[
    Optional[Path],
    typer.Option(
        "--report",
        help="At the end, write the HTML report of this run to FILE (as `omni report`; needs omnicli[report]).",
        metavar="FILE",
    ),
]


def report(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Folders (or bench result files) to read: synth OUT, eval/eval-wer --out, bench --result-dir, "
                 "--keep-failed.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="The HTML file to write (.html; audio is linked relative to its folder). Not an input."
        ),
    ] = Path("report.html"),
    embed_audio: Annotated[
        Optional[str],
        typer.Option(
            "--embed-audio",
            help="Inline audio into the page: worst:N (the N worst rows' clips, for mailing the file), all, or none.",
            metavar="worst:N",
        ),
    ] = None,
    manifest: Annotated[
        Optional[Path],
        typer.Option(
            "--manifest", "-m", help="Manifest for texts and reference prompts (default: the one each run recorded)."
        ),
    ] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="Page title.")] = None,
) -> None:
    """Write one self-contained HTML page to look at and listen to runs.

    Reads whatever the folders hold (nothing is re-run): synth results and
    summary, eval / eval-wer results, bench result files (with or without
    --save-detailed, several for an A/B) and retained failed audio. The page
    opens from file:// with no network: a sortable, filterable table of every
    utterance with its audio beside its reference prompt and the ASR word diff,
    histograms, bench sweep curves, per-request timelines and A/B differences
    with confidence intervals.

    Exit codes: 0 written; 2 bad usage or nothing to report (or the report extra
    is missing); 4 the page could not be written.
    """
    from omnicli.report import missing_extra

    if (why := missing_extra()) is not None:
        raise UsageError(why)
    facts = _write(paths, out, embed_audio, manifest, title)
    typer.echo(f"report: {facts.path} ({facts.bytes / 1e6:.1f} MB, {facts.rows} utterances, {facts.runs} bench runs"
               + (f", {facts.embedded} clips embedded" if facts.embedded else "") + ")")


def _write(
    paths: list[Path], out: Path, embed_audio: str | None, manifest: Path | None, title: str | None
) -> PageFacts:
    from omnicli.report import write_report
    from omnicli.report.page import EmbedSpec
    from omnicli.report.sources import SourceError

    if manifest is not None and not manifest.is_file():
        raise UsageError(f"--manifest {manifest}: no such file")
    try:
        return write_report(paths, out, embed_audio=embed_audio, manifest=manifest, title=title)
    except (SourceError, EmbedSpec) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise OutputError(f"cannot write {out}: {exc}") from None


def check_report_option(out: Path | None) -> None:
    """Exit 2 before any work when --report is given but cannot be honoured."""
    if out is None:
        return
    from omnicli.report import missing_extra

    if (why := missing_extra()) is not None:
        raise UsageError(f"--report: {why}")
    from omnicli.report import check_out
    from omnicli.report.sources import SourceError

    try:
        check_out(out)
    except SourceError as exc:
        raise UsageError(str(exc).replace("--out", "--report", 1)) from None


def report_after_run(out: Path | None, paths: list[Path]) -> None:
    """Writes the run's report; a failure is a warning (the run's results are written and its exit code stands)."""
    if out is None:
        return
    from omnicli.report import write_report

    try:
        facts = write_report([p for p in paths if p.exists()], out)
    except Exception as exc:  # whatever went wrong, the run is done and its results are written
        err_console.print(f"[yellow]warning:[/yellow] --report {out} not written: {escape(str(exc))}", highlight=False)
        return
    note(f"report: {facts.path}")
