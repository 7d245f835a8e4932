"""Reading other tools' files: line by line, damaged lines skipped and counted.

:func:`json_lines` yields each JSON object line of a JSONL file with its
number; a line that is not one (cut short, not JSON, not an object, nested
deeper than OLLM stores) goes to :class:`DamagedLines`, which counts it, or,
when the import is strict, refuses the file with the line's
:class:`ImportFormatError`. A line that holds a lone surrogate escape (a cut
emoji: valid JSON that orjson refuses) is read with the standard library.

Example::

    damaged = DamagedLines()
    for number, line in json_lines(path, "Codex", damaged):
        ...
    damaged.lines   # [7, 12]: the numbers of the lines skipped
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.pipeline.errors import SessionError

SQLITE_MAGIC = b"SQLite format 3\x00"


class ImportFormatError(SessionError):
    """A file given to ``ollm sessions import`` is not in the format it claims."""


def bad_file(path: Path, where: str, problem: str, source: str) -> ImportFormatError:
    """The error for ``path`` at ``where`` (``line 3``, ``row 7``) holding ``problem``."""
    return ImportFormatError(
        f"{path}: {where}: {problem}",
        hint=f"this does not look like a {source} file; pass the right --from "
        "(claude-code, codex, gemini, llm) or leave it out to have the format recognised",
    )


@dataclass
class DamagedLines:
    """The lines of one file skipped as damaged (``strict``: the first one refuses the file)."""

    strict: bool = False
    lines: list[int] = field(default_factory=list)

    def skip(self, number: int, error: ImportFormatError) -> None:
        """Skip line ``number`` (or raise ``error`` when strict)."""
        if self.strict:
            error.hint = (
                f"{error.hint}; without --strict, damaged lines are skipped and counted"
                if error.hint
                else "without --strict, damaged lines are skipped and counted"
            )
            raise error
        self.lines.append(number)


def json_lines(
    path: Path, source: str, damaged: DamagedLines
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-empty line of a JSONL file; a line that
    is not a JSON object goes to ``damaged``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            value = _with_lone_surrogates(line)
            if value is None:
                problem = f"not JSON ({exc.msg})"
                damaged.skip(number, bad_file(path, f"line {number}", problem, source))
                continue
        if not isinstance(value, dict):
            problem = f"a {type(value).__name__}, not a JSON object"
            damaged.skip(number, bad_file(path, f"line {number}", problem, source))
            continue
        if line.count(b"[") + line.count(b"{") > MAX_DEPTH and too_deep(value):
            problem = f"values nested more than {MAX_DEPTH} levels deep (OLLM stores fewer)"
            damaged.skip(number, bad_file(path, f"line {number}", problem, source))
            continue
        yield number, value


MAX_DEPTH = 200
"""How deep the values of a line may nest: orjson writes at most 255 levels, and a
session wraps a line's values in a few levels of its own."""


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _with_lone_surrogates(line: bytes) -> Any | None:
    """A line orjson refuses only for a lone surrogate escape (``"\\ud800"``, as a
    cut emoji leaves): valid JSON, parsed by the standard library, each lone
    surrogate becoming U+FFFD. None when the line is not such JSON."""
    if b"\\u" not in line:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return _no_surrogates(value)


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    return value


def read_json(path: Path, source: str) -> Any:
    """The JSON document in ``path``, or an error naming the line where it breaks."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise bad_file(
            path, f"line {exc.lineno}, column {exc.colno}", f"not JSON ({exc.msg})", source
        ) from None
