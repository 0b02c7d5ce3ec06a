"""Packaging: everything under omnicli/data ships in the wheel; presets and the demo set are found from the package."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib
from typer.testing import CliRunner

import omnicli
from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from omnicli.profile.presets import preset_names, presets_dir

REPO = Path(__file__).resolve().parent.parent
PACKAGE = Path(omnicli.__file__).parent


def test_every_data_file_is_declared_package_data():
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["omnicli"]
    files = [
        p.relative_to(PACKAGE).as_posix()
        for p in (PACKAGE / "data").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert files, "omnicli/data is empty"
    undeclared = [f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert not undeclared, f"not in [tool.setuptools.package-data]: {undeclared}"
    assert "py.typed" in globs and (PACKAGE / "py.typed").is_file()


def test_presets_and_demo_come_from_the_package(monkeypatch):
    monkeypatch.delenv("OMNI_PROFILES_DIR", raising=False)
    assert presets_dir().is_relative_to(PACKAGE) and "default" in preset_names()
    assert demo_manifest_path().is_relative_to(PACKAGE) and demo_manifest_path().is_file()
    # The repository keeps its short paths to the same files (README's first command; the presets).
    assert (REPO / "datasets" / "demo" / "meta.lst").resolve() == demo_manifest_path().resolve()
    assert (REPO / "profiles").is_symlink() and (REPO / "profiles").resolve() == presets_dir().resolve()


def test_profiles_dir_override(monkeypatch, tmp_path):
    (tmp_path / "mine.yaml").write_text("# Mine.\nmodel: omni-tiny\n")
    monkeypatch.setenv("OMNI_PROFILES_DIR", str(tmp_path))
    assert preset_names() == ["mine"]


def test_datasets_command_and_synth_demo_flag():
    runner = CliRunner()
    result = runner.invoke(app, ["datasets", "path", "demo"])
    assert result.exit_code == 0 and Path(result.output.strip()) == demo_manifest_path()
    result = runner.invoke(app, ["datasets", "path", "nope"])
    assert result.exit_code == 2 and "unknown dataset" in result.output
    # MANIFEST and --demo are exclusive; neither is a usage error too (checked before any engine start).
    both = runner.invoke(app, ["synth", str(demo_manifest_path()), "--demo"])
    neither = runner.invoke(app, ["synth", "--out", "x"])
    assert both.exit_code == neither.exit_code == 2 and "--demo" in both.output


def test_license_matches_pyproject():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"]["text"] == "Apache-2.0"
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()


def test_readme_links_every_docs_page_and_every_link_resolves():
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert [p for p in pages if f"](docs/{p})" not in readme] == []
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.name}: broken link {target}"


def test_only_shipped_files_are_cited():
    cited = []
    for path in [REPO / "README.md", *(REPO / "docs").glob("*.md"), *PACKAGE.rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        cited += [f"{path.name}: {name}" for name in ("METRICS.md", "ARCHITECTURE.md") if name in text]
    assert cited == []
