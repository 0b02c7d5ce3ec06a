"""Every import points down the layers, and no module imports itself back through others.

The layers, highest first (docs/architecture.md):

    commands (cli) > report > benchmark > synth / driver / evaluation / vllm_omni
    > engine > profile / families > runtime / errors / atomic and the small leaf modules

A module may import its own package, any package on its own layer, and anything
lower. Function-level imports count (they run); imports under `if TYPE_CHECKING:`
do not (they never run). Cycles are counted between modules, function-level
imports included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import omnicli

PACKAGE = Path(omnicli.__file__).parent

# Lowest first. A unit is a subpackage of omnicli or a top-level module.
LAYERS: list[set[str]] = [
    {"omnicli", "runtime", "errors", "atomic", "lazy", "audio", "model_files", "manifest", "datasets", "checkpoints"},
    {"profile", "families"},
    {"engine"},
    {"synth", "driver", "evaluation", "vllm_omni", "reference_voice", "retention", "parity", "environment"},
    {"benchmark"},
    {"report"},
    {"commands", "cli", "__main__"},
]
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}
# Cycles accepted for now (none since each vLLM-Omni family has a spec, issue 35 item 8); the test
# fails when a listed one is gone, so that its entry goes with it.
KNOWN_CYCLES: list[list[str]] = []


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "omnicli"


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _known_modules() -> set[str]:
    return {module_name(path) for path in PACKAGE.rglob("*.py") if "import_shims" not in path.parts}


def imports() -> list[tuple[str, str, Path, int]]:
    """(importing module, imported omnicli module, file, line) for every import that runs."""
    known = _known_modules()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "import_shims" in path.parts:  # stand-in packages named torchvision/torchaudio, not omnicli code
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        source = module_name(path)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.split(".")[0] == "omnicli"]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != "omnicli":
                    continue
                # `from pkg import sub` imports the submodule `pkg.sub` when there is one
                targets = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
                targets = targets or [node.module]
            for target in targets:
                found.append((source, target, path, node.lineno))
    return found


def test_every_unit_is_placed_on_a_layer():
    units = {unit_of(module) for module in _known_modules()}
    assert units - set(LAYER_OF) == set(), "place the new package or module in LAYERS (and docs/architecture.md)"


def test_no_import_points_up_the_layers():
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {target} "
        f"(layer {LAYER_OF[unit_of(source)]} -> {LAYER_OF[unit_of(target)]})"
        for source, target, path, line in imports()
        if LAYER_OF[unit_of(target)] > LAYER_OF[unit_of(source)]
    ]
    assert upward == []


def test_no_import_cycle_between_modules():
    known = _known_modules()
    graph: dict[str, set[str]] = {module: set() for module in known}
    where: dict[tuple[str, str], str] = {}
    for source, target, path, line in imports():
        if target in known and target != source:
            graph[source].add(target)
            where.setdefault((source, target), f"{path.relative_to(PACKAGE.parent)}:{line}")
    cycles = _cycles(graph)
    assert [c for c in KNOWN_CYCLES if c not in cycles] == [], "a known cycle is gone: remove it from KNOWN_CYCLES"
    cycles = [c for c in cycles if c not in KNOWN_CYCLES]
    described = [" -> ".join(cycle + [cycle[0]]) + "  (" + ", ".join(
        where[(a, b)] for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)) + ")" for cycle in cycles]
    assert described == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(_one_cycle(graph, sorted(component)))
    return components


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first), for the message."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return paths[node]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    following.append(child)
        frontier = following
    return component


def test_the_checker_sees_an_upward_import_and_a_cycle():
    # The rule itself can fail: engine (2) importing benchmark (4) is reported.
    assert LAYER_OF[unit_of("omnicli.benchmark.report")] > LAYER_OF[unit_of("omnicli.engine.engine")]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
