"""Headless Chromium for checking a report page: the tests and scripts/report_open_time.py use it.

Debian's /usr/bin/chromium (scripts/setup.sh installs it), driven by
Playwright's Python package with the system browser; Playwright's own browser
download is never used. The flags keep a closed-network machine quiet (no
background fetches, no sync, no component updates) and a fresh profile folder
is used each time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("OMNI_CHROMIUM", "/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
)


def unavailable() -> str | None:
    """Why no browser can be driven here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install 'omnicli[dev]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set OMNI_CHROMIUM)"
    return None


@contextmanager
def chromium() -> Iterator[object]:
    """A launched headless browser (playwright Browser), closed and its profile removed on exit."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="omni-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=list(FLAGS),
                ignore_default_args=["--enable-automation"],
                viewport={"width": 1400, "height": 900},
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
