"""`omni report`: one self-contained HTML page to look at and listen to runs (docs/report.md).

    from omnicli.report import write_report
    facts = write_report([Path("out/"), Path("results/")], Path("report.html"), embed_audio="worst:10")

Reading the folders (sources.py) and joining rows (rows.py) need only the core
dependencies; the page (page.py: Jinja2 and plotly.js) needs the `report`
extra, checked by `missing_extra()`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omnicli.report.page import PageFacts

INSTALL_HINT = "pip install 'omnicli[report]'"
_NEEDS = ("jinja2", "plotly")


def missing_extra() -> str | None:
    """Why the page cannot be built here (a module of the extra is missing), or None."""
    absent = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if absent:
        return f"the report needs {', '.join(absent)}: {INSTALL_HINT}"
    return None


def write_report(paths: list[Path], out: Path, *, embed_audio: str | None = None, manifest: Path | None = None,
                 title: str | None = None) -> PageFacts:
    """Reads `paths` and writes the page to `out` (atomically); returns its PageFacts.

    Raises SourceError when nothing known is in `paths`, EmbedSpec for a bad `embed_audio`."""
    from omnicli.report.page import Embed, build_page
    from omnicli.report.sources import SourceError, read_sources

    embed = Embed.parse(embed_audio)
    check_out(out, paths)
    sources = read_sources(paths)
    if sources.empty():
        raise SourceError(f"nothing to report in {', '.join(map(str, paths))}: no synth, eval or bench results found"
                          + (f" ({'; '.join(sources.notes[:3])})" if sources.notes else ""))
    return build_page(sources, out, embed=embed, manifest=manifest, title=title,
                      audio_roots=[p for p in paths if p.is_dir()])


HTML_SUFFIXES = (".html", ".htm")


def check_out(out: Path, inputs: Sequence[Path] = ()) -> None:
    """Raises SourceError (exit 2) for an --out that is not an .html file or is one of the inputs (the page
    would replace the run's own results)."""
    from omnicli.report.sources import SourceError

    if out.suffix.lower() not in HTML_SUFFIXES:
        raise SourceError(f"--out {out}: the page is written as HTML; give a file name ending in .html")
    if out.is_dir():
        raise SourceError(f"--out {out}: a folder; give the HTML file to write")
    target = out.resolve()
    for path in inputs:
        if path.resolve() == target:
            raise SourceError(f"--out {out}: one of the inputs; the page would replace it")
