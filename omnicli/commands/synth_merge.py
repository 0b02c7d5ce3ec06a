"""`omni synth-merge SHARD_DIR... --out OUT`: shard folders -> one synth folder (parse + print)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from omnicli.commands.common import QuietOption, VerboseOption, require_folder
from omnicli.errors import Interrupted, OutputError
from omnicli.runtime.console import console, err_console, note, set_verbosity, status

if TYPE_CHECKING:
    from omnicli.synth.merge import MergeReport


def synth_merge(
    shard_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="SHARD_DIR",
            help="Folders written by `omni synth --shard I/N` (a shell glob such as out/shard-* is fine).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="The merged folder: <utt>.wav (hard links where possible), results.jsonl, summary.json.",
            show_default=False,
        ),
    ],
    manifest: Annotated[
        Optional[Path],
        typer.Option(
            "--manifest",
            "-m",
            help="The manifest the shards ran (default: the one their summary.json names; give it when the "
                 "shards saw it under different paths).",
            show_default=False,
        ),
    ] = None,
    allow_outside_paths: Annotated[
        bool, typer.Option("--allow-outside-paths", help="As the shards' `omni synth --allow-outside-paths`.")
    ] = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Combine the folders of `omni synth --shard I/N` runs into one synth folder.

    OUT then holds what one whole run would have left: every shard's wavs,
    one results.jsonl row per utterance and a summary.json over the whole
    manifest, so `omni synth MANIFEST --out OUT` resumes it (nothing to do
    once every shard is done) and `omni eval-wer OUT` scores it. The folders
    must be shards of one split (same N, manifest and --limit); missing shards
    and rows not done are reported and stay pending. Merging again into the
    same OUT updates it. Exit code: 0 every row ok, 1 rows failed, invalid or
    not done (or shards missing), 2 the folders cannot be merged, 4 OUT could
    not be written (merge again).
    """
    from omnicli.synth.merge import merge_shards

    set_verbosity(quiet, verbose)
    require_folder(out, "--out")
    try:
        with status(f"merging {len(shard_dirs)} shard folder(s) into {out}"):
            report = merge_shards(shard_dirs, out, manifest=manifest, allow_outside_paths=allow_outside_paths)
    except OSError as exc:
        error = OutputError(f"cannot write to {out}: {exc}\n"
                            "what was merged so far is consistent: free space or fix the folder, then merge again")
        error.message_below = True
        raise error from None
    except KeyboardInterrupt:
        raise Interrupted("what was merged so far is consistent; merge again to finish") from None
    if report.skipped_out:
        note(f"{out} is --out itself: not read as a shard")
    for reason in report.not_taken:
        err_console.print(Text.assemble(("not taken", "yellow"), f" {reason} (left pending)"))
    assert report.summary is not None  # merge_shards sets it before it returns
    if report.foreign:
        note(f"{report.foreign} row(s) in the shard folders belong to no shard of {report.summary.manifest}: ignored")
    if len(report.profile_digests) > 1:
        err_console.print(
            Text.assemble(
                ("note:", "yellow"),
                f" the shards ran different profiles ({', '.join(report.profile_digests)}); summary.json records "
                "the first",
            )
        )
    if report.missing:
        err_console.print(
            Text.assemble(
                ("missing:", "yellow"),
                f" shard(s) {', '.join(f'{i}/{report.count}' for i in report.missing)}: their rows are pending",
            )
        )
    _print_report(report)
    raise typer.Exit(report.exit_code)


def _print_report(report: MergeReport) -> None:
    summary = report.summary
    assert summary is not None  # merge_shards sets it before it returns
    console.print(Text(f"omni synth-merge -> {report.out}"), highlight=False)
    table = Table(show_header=False)
    table.add_row("shards", f"{len(report.shards)} of {report.count}")
    table.add_row("rows", str(summary.num_rows))
    table.add_row("ok / failed / pending", f"{summary.num_ok} / {summary.num_failed} / {summary.num_pending}")
    table.add_row("invalid rows", str(summary.num_invalid_rows))
    table.add_row("audio (all ok rows)", f"{summary.audio_seconds:.2f} s")
    table.add_row("wavs", f"{report.linked} hard-linked, {report.copied} copied")
    table.add_row("profile", f"{summary.profile_name} ({summary.profile_digest})")
    console.print(table)
    console.print(Text(f"results: {report.out / 'results.jsonl'}  summary: {report.out / 'summary.json'}"))
