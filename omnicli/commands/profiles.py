"""`omni profiles`: list, show, validate and diff engine profiles."""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from omnicli.commands.common import SetOption
from omnicli.errors import UsageError
from omnicli.runtime.console import console

if TYPE_CHECKING:
    from omnicli.profile import ResolvedProfile

app = typer.Typer(
    help="Engine profiles: YAML files selecting every engine setting (see docs/profiles.md).",
    no_args_is_help=True,
)


class PlatformChoice(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


PlatformOption = Annotated[
    Optional[PlatformChoice],
    typer.Option(
        "--platform",
        help="Resolve for this platform (its `platforms:` overlay and CUDA-only checks) instead of this machine's.",
        show_default="detected",
    ),
]


def _load(name: Optional[str], sets: Optional[list[str]], platform: Optional[PlatformChoice]) -> ResolvedProfile:
    from omnicli.profile import ProfileError, load_profile

    try:
        return load_profile(name, overrides=sets or [], platform=platform.value if platform else None)
    except ProfileError as exc:  # every problem on a line of its own, below a headline naming the profile
        error = UsageError("\n".join(f"  {problem}" for problem in exc.problems))
        error.headline = f"profile error ({name or 'default'})"
        error.message_below = True
        raise error from None


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@app.command("list")
def list_profiles() -> None:
    """List the shipped presets and what each is for."""
    from omnicli.profile import list_presets, presets_dir

    presets = list_presets()
    if not presets:
        raise UsageError(f"no presets found in {presets_dir()}")
    # A line of its own, not the table's title: a title wraps at the table's width,
    # which would cut a long folder path in two even in a pipe.
    console.print(Text(f"Profiles in {presets_dir()}"), highlight=False)
    table = Table()
    table.add_column("Name", style="bold cyan", no_wrap=True)
    table.add_column("Description")
    for preset in presets:
        table.add_row(preset.name, Text(preset.description or "-"))
    console.print(table)


@app.command("show")
def show(
    name: Annotated[
        Optional[str], typer.Argument(help="Preset name or path to a YAML file.", show_default="default")
    ] = None,
    sets: SetOption = None,
    platform: PlatformOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the resolved profile as JSON.")] = False,
) -> None:
    """Show a fully resolved profile and where each value comes from."""
    resolved = _load(name, sets, platform)
    if as_json:
        doc = {
            "name": resolved.name,
            "source": str(resolved.source) if resolved.source else None,
            "platform": resolved.platform,
            "digest": resolved.digest,
            "profile": resolved.to_dict(),
            "origins": resolved.origins,
        }
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    console.print(
        Text(f"{resolved.name} ({resolved.source}) for {resolved.platform}, digest {resolved.digest}"), highlight=False
    )
    table = Table()
    table.add_column("Key", style="cyan", no_wrap=True)
    table.add_column("Value")
    table.add_column("From")
    for key, value in resolved.flat().items():
        origin = resolved.origins.get(key, "default")
        style = "dim" if origin == "default" else ("yellow" if origin == "--set" else "")
        table.add_row(key, Text(_value(value)), Text(origin, style=style))
    console.print(table)


@app.command("validate", no_args_is_help=True)
def validate(
    files: Annotated[list[str], typer.Argument(help="Profile files (or preset names) to check.")],
    platform: PlatformOption = None,
) -> None:
    """Check profile files; exit 2 when any is invalid, printing every error."""
    from omnicli.profile import ProfileError, load_profile

    bad = 0
    for item in files:
        try:
            resolved = load_profile(item, platform=platform.value if platform else None)
        except ProfileError as exc:
            bad += 1
            console.print(Text(f"✗ {item}", style="bold red"))
            for problem in exc.problems:
                console.print(Text(f"    {problem}"))
            continue
        console.print(
            Text(f"✓ {item}", style="green"), Text(f"({resolved.platform}, digest {resolved.digest})", style="dim")
        )
    if bad:
        raise UsageError(f"{bad} of {len(files)} profile(s) invalid")


@app.command("diff")
def diff(
    a: Annotated[str, typer.Argument(help="First profile (name or path).")],
    b: Annotated[str, typer.Argument(help="Second profile (name or path).")],
    platform: PlatformOption = None,
) -> None:
    """Table of the keys whose resolved values differ between two profiles."""
    from omnicli.profile import diff_profiles

    ra, rb = _load(a, [], platform), _load(b, [], platform)
    rows = diff_profiles(ra, rb)
    if not rows:
        console.print(f"no differences (digest {ra.digest})")
        return
    table = Table(title=f"{len(rows)} differing key(s)", title_justify="left")
    table.add_column("Key", style="cyan", no_wrap=True)
    table.add_column(Text(f"{ra.name} ({ra.platform})"))
    table.add_column(Text(f"{rb.name} ({rb.platform})"))
    for key, va, vb in rows:
        table.add_row(key, Text(_value(va)), Text(_value(vb)))
    console.print(table)
