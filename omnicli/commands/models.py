"""`omni models`: list the model families, build test checkpoints, verify parity."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from omnicli.errors import OmniError, UsageError
from omnicli.runtime.console import console, err_console

app = typer.Typer(help="Model families the engine can run.", no_args_is_help=True)


@app.command("list")
def list_models(
    model_path: str = typer.Option(
        None, "--model-path", help="Check this talker checkpoint instead of the family's default."
    ),
    codec_path: str = typer.Option(
        None, "--codec-path", help="Check this codec checkpoint instead of the family's default."
    ),
) -> None:
    """List model families, what each needs on disk and whether it is present."""
    from omnicli.families import family_names, family_status

    table = Table("model", "description", "needs", "present")
    for name in family_names():
        st = family_status(name, model_path, codec_path)
        needs = "\n".join(p[0] for p in st.parts) or "nothing (built locally on first use)"
        where = "\n".join(("yes: " if ok else "no: ") + w for _, ok, w in st.parts) or "yes"
        table.add_row(name, st.description, needs, where)
    console.print(table)


@app.command("build-tiny")
def build_tiny(
    family: str = typer.Argument(..., help="Family to build: orpheus, neutts-air, qwen3-tts."),
    dest: Path = typer.Argument(
        ..., help="New folder; DEST/talker and DEST/codec are written (qwen3-tts: DEST/base, DEST/custom_voice)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    real_size: bool = typer.Option(False, "--real-size", help="The published sizes (large: for benchmarks only)."),
    stop_frames: float = typer.Option(
        None, "--stop-frames", metavar="N",
        help="qwen3-tts only: a talker that ends by codec EOS after about N frames on average (12.5 frames/s; "
        "lengths vary geometrically, N above 1). Without it a random talker almost never says EOS, so every "
        "request runs into its token budget (vLLM-Omni's server rejects a Base request that ends so).",
    ),
) -> None:
    """Write random-weight checkpoints in the family's published layout (for tests and benchmarks).

    Example: `omni models build-tiny qwen3-tts /tmp/q3 --stop-frames 25`, then
    `omni synth meta.lst --out out --profile qwen3-tts --set model_path=/tmp/q3/base`.
    """
    from omnicli.families import build_tiny as build

    try:
        with err_console.status(f"building {family} into {dest}"):
            info = build(family, dest, seed=seed, real_size=real_size, stop_frames=stop_frames)
    except (ValueError, FileExistsError) as exc:
        raise UsageError(str(exc)) from None
    folders = info.get("model_path_folders")  # one-folder checkpoints (vLLM-Omni families), one per variant
    use = (f"--set model_path={dest}/{folders[0]}" + "".join(f" or {dest}/{f}" for f in folders[1:]) if folders
           else f"--set model_path={dest}/talker --set codec_path={dest}/codec")
    console.print(f"[green]{family}[/green] at {dest} (use --set model={family} {use})")
    console.print_json(data=info)


@app.command("build")
def build_model(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the cache already holds it."),
) -> None:
    """Build omni-tiny into the cache now (otherwise it happens on first use)."""
    from omnicli.engine.models import omni_tiny

    with err_console.status("building omni-tiny"):
        path = omni_tiny.build(force=force)
    info = json.loads((path / "BUILD_OK").read_text())
    console.print(f"[green]omni-tiny[/green] at {path}")
    console.print_json(data=info)


@app.command("verify")
def verify(
    family: str = typer.Argument(..., help="Family to check: orpheus, neutts-air, qwen3-tts."),
    checkpoint: Path = typer.Option(
        ...,
        "--checkpoint",
        help="Folder with talker/ and codec/, or the one checkpoint folder of a "
        "vLLM-Omni family (e.g. from build-tiny).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random codes and audio the checks use."),
) -> None:
    """Parity checks against the family's reference code; exit 1 on any mismatch.

    Each check prints its figure. Checks whose reference package is not
    installed are shown as skipped (install the `reference` extra).
    """
    from omnicli.checkpoints import CheckpointMissing
    from omnicli.families import check_checkpoints, get_family, run_parity_checks

    try:
        specs = get_family(family).checkpoint_specs()
        if specs and all(s.profile_key == "model_path" for s in specs):  # the whole checkpoint in one folder
            check_checkpoints(family, str(checkpoint), None)
        else:
            check_checkpoints(family, str(checkpoint / "talker"), str(checkpoint / "codec"))
        with err_console.status(f"verifying {family} at {checkpoint}"):
            report = run_parity_checks(family, checkpoint, seed=seed)
    except (ValueError, CheckpointMissing) as exc:  # ModelFileError too: a pickled codec, remote code
        error = UsageError(str(exc))
        error.message_below = "\n" in str(exc)
        raise error from None
    except Exception as exc:  # a parity check that broke: one line (exit 1), never a traceback
        raise OmniError(f"verify {family} stopped: {type(exc).__name__}: {exc}") from None
    style = {"ok": "green", "mismatch": "red", "skipped": "yellow"}
    for c in report:
        line = f"{c.status.upper():8} {c.name}: {c.figure}" + (f" ({c.detail})" if c.detail else "")
        console.print(f"[{style[c.status]}]{c.status.upper():8}[/]", end=" ")
        console.print(line[9:], markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"{report.count('ok')} ok, {report.count('mismatch')} mismatched, {report.count('skipped')} skipped",
        soft_wrap=True,
    )
    raise typer.Exit(report.exit_code)
