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
