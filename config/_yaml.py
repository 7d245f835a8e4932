"""YAML parsing with bounds: the config files' and ``OLLM_*`` variables' parser.

A separate module so that PyYAML (about 15 ms to import) is loaded only when
there is YAML to read: a user without config files never pays for it.

Example::

    parse_yaml("services: {compression: {threshold: 0.7}}")
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_DEPTH = 64
"""Deeper nesting than this is refused before it reaches the parser's recursion."""
MAX_YAML_NODES = 100_000
"""A document that expands (aliases included) to more nodes than this is refused."""


class BoundedLoader(yaml.SafeLoader):
    """A safe loader that refuses deep nesting and alias bombs before building anything."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise YamlLimit(f"it is nested more than {MAX_YAML_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class YamlLimit(Exception):
    """A YAML document beyond the loader's bounds."""


class YamlSyntax(Exception):
    """Text that is not YAML: what is wrong (``problem``) and ``where`` (or "")."""

    def __init__(self, problem: str, where: str) -> None:
        super().__init__(f"{problem}{where}")
        self.problem = problem
        self.where = where


def _expanded_size(node: yaml.Node) -> int:
    """How many nodes ``node`` stands for once every alias is expanded (memoised)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        key = id(current)
        if key in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(current, yaml.SequenceNode):
            children = list(current.value)
        elif isinstance(current, yaml.MappingNode):
            children = [part for pair in current.value for part in pair]
        if children_done:
            total = 1 + sum(sizes[id(child)] for child in children)
            sizes[key] = min(total, MAX_YAML_NODES + 1)
            continue
        stack.append((current, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(node)]


def parse_yaml(text: str) -> Any:
    """``text`` parsed as YAML with bounded nesting and alias expansion.

    Raises :class:`YamlSyntax` for bad syntax and :class:`YamlLimit` past a bound.
    """
    try:
        loader = BoundedLoader(text)  # the reader refuses control characters here
    except yaml.YAMLError as exc:
        raise _syntax(exc) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_NODES:
            raise YamlLimit(
                f"it expands to more than {MAX_YAML_NODES} values (aliases repeated "
                f"inside aliases, a 'billion laughs')"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _syntax(exc) from None
    except RecursionError:
        raise YamlLimit("it is nested too deeply") from None
    except ValueError:  # int() past Python's digit limit, for one
        raise YamlLimit("it holds a number with thousands of digits") from None
    finally:
        loader.dispose()


def _syntax(error: yaml.YAMLError) -> YamlSyntax:
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or getattr(error, "reason", None) or "invalid YAML"
    return YamlSyntax(str(problem), where)
