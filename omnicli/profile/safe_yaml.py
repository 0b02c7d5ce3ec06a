"""Parse untrusted YAML (profiles, `--set` values) with bounds on its shape.

`yaml.safe_load` refuses arbitrary objects but not two other attacks that a
file of a few hundred bytes can carry:

- an alias bomb: anchors that alias anchors ten levels deep describe billions
  of values; every walk over the result (line indexing, merging, the
  profile digest) expands them, so memory or time runs out;
- deep nesting: PyYAML's composer, and every walk after it, recurse once per
  level, so a few hundred levels end in RecursionError.

`check_shape` reads the event stream (PyYAML's parser is not recursive) and
counts every value as if aliases were expanded, stopping at the first event
over a bound, before anything builds or walks the tree.
"""

from __future__ import annotations

from typing import Any

import yaml

# A profile has about a hundred values and is nested four levels at most
# (platforms.cuda.model_options.key); these leave ample room for anchors
# used to repeat a few settings.
MAX_DEPTH = 32
MAX_VALUES = 10_000


class YamlShapeError(ValueError):
    """YAML that is well-formed but too deep or too large once aliases are expanded."""

    def __init__(self, line: int, reason: str):
        self.line = line  # 1-based
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


def check_shape(text: str, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Raises YamlShapeError when `text` nests deeper than `max_depth` or holds more
    than `max_values` values with aliases expanded (or an alias to itself).
    Syntax errors are left to the loader (yaml.YAMLError)."""
    sizes: dict[str, int] = {}  # anchor -> values it expands to
    open_anchors: set[str] = set()
    stack: list[list] = []  # per open collection: [anchor, values so far]

    def add(count: int, line: int) -> None:
        if stack:
            stack[-1][1] += count
            if stack[-1][1] > max_values:
                raise YamlShapeError(
                    line, f"more than {max_values} values once aliases are expanded (an alias bomb?); "
                    "use anchors and aliases only to repeat a few settings"
                )

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= max_depth:
                raise YamlShapeError(line, f"nested more than {max_depth} levels deep")
            stack.append([event.anchor, 1])
            if event.anchor is not None:
                open_anchors.add(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, count = stack.pop()
            if anchor is not None:
                open_anchors.discard(anchor)
                sizes[anchor] = count
            add(count, line)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1, line)
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise YamlShapeError(line, f"alias *{event.anchor} refers to a value that contains it")
            add(sizes.get(event.anchor, 1), line)  # an undefined alias is the composer's error


def load_checked(text: str) -> tuple[yaml.Node | None, Any]:
    """(node tree, data) of a single YAML document whose shape passed `check_shape`.
    Raises YamlShapeError or yaml.YAMLError."""
    check_shape(text)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data
