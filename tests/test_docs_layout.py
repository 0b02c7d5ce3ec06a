"""README's Layout names every module of the package, so the map cannot fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "omnicli"


def layout_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]  # the code block that maps the tree


def modules() -> list[Path]:
    return sorted(
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*.py")
        if p.name not in {"__init__.py", "__main__.py"} and "import_shims" not in p.parts
    )


def test_every_module_is_named_in_the_readme_layout_under_its_folder():
    block = layout_block()
    # The block is a column of "omnicli/<folder>/  <text>" entries whose text runs on over indented lines.
    entries: dict[str, str] = {}
    folder = None
    for line in block.splitlines():
        head = re.match(r"omnicli/(\S*)\s", line + " ")
        if head:
            token = head.group(1)
            folder = str(Path(token).parent) if token.endswith(".py") else token.rstrip("/")
            folder = "" if folder == "." else folder
            entries[folder] = entries.get(folder, "") + line[head.start(1):] + "\n"
        elif folder is not None:
            entries[folder] += line + "\n"
    missing = []
    for module in modules():
        folder = "/".join(module.parts[:-1])
        text = entries.get(folder, "")
        if folder.startswith("commands"):
            continue  # one module per command; the folder line says so
        if not re.search(rf"(?<![\w/]){re.escape(module.stem)}(\.py)?(?!\w)", text):
            missing.append(str(module))
    assert not missing, f"README's Layout does not name: {missing}"


def _module_source(parts: list[str]) -> tuple[str, list[str]] | None:
    """The source of the longest omnicli module prefix of `parts`, and the names after it."""
    for n in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:n])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate.read_text(), parts[n:]
    return None


def test_every_module_and_name_the_architecture_page_cites_exists():
    text = (REPO / "docs" / "architecture.md").read_text()
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir()} | {p.stem for p in PACKAGE.glob("*.py")}
    wrong = []
    for ref in sorted(set(re.findall(r"`([a-z_]+(?:[./][A-Za-z_]+)+)`", text))):
        if ref.endswith(".py"):
            path = ref.removeprefix("omnicli/")
            if "/" in path and not (PACKAGE / path).is_file() and not (REPO / path).is_file():
                wrong.append(ref)
            continue
        parts = re.split(r"[./]", ref.removeprefix("omnicli/"))
        if parts[0] not in packages:
            continue  # not a reference into the package (a file name, an attribute of an object)
        found = _module_source(parts)
        if found is None:
            wrong.append(ref)
            continue
        source, names = found
        if names and not re.search(rf"\b{re.escape(names[0])}\b", source):
            wrong.append(ref)
    assert not wrong, f"docs/architecture.md cites what the code does not have: {wrong}"
