"""The syntax of gitignore patterns: one line parsed and translated to a regex.

The parser every pattern setting is checked with and every ignore file is matched
with (:mod:`ollm_cli.pipeline.discovery._ignore_rules` compiles what it returns),
so that a setting is accepted exactly when it can match. It lives with the
configuration because the settings validate with it, and discovery builds on it.

The translation follows git's ``dir.c`` and ``wildmatch.c``: ``*`` and ``?``
never match ``/``; ``**/`` at the start, ``/**/`` in the middle and ``/**`` at
the end cross directories; ``[...]`` classes take ranges, ``!``/``^`` and
``[:alpha:]``-style names; trailing spaces are dropped unless escaped. A line git
can never match (an unclosed class, a trailing backslash, an unknown
``[:class:]``) raises :class:`NeverMatchesError`, and so does one that needs more
characters than any path has (:data:`LONGEST_PATH`): whatever its length, a
line's regex stays small enough to compile and to match at once.

Example::

    rule = parse_rule("!/build/")
    rule.negated, rule.dir_only, rule.basename_only    # (True, True, False)
    parse_rule("# a comment")                          # None
    parse_rule("[abc")                                 # raises NeverMatchesError
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

_POSIX_CLASSES: dict[str, str] = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~").replace("]", "\\]"),
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


#: The longest path a program can name on Linux (``PATH_MAX``, with its final NUL):
#: no path relative to an ignore file's directory has this many characters, so a
#: pattern that needs as many matches nothing, in git or here.
LONGEST_PATH = 4096

#: Why git never matches a line: the reason :class:`NeverMatchesError` gives by default.
_GIT_SKIPS_IT = "git skips it too"


class NeverMatchesError(ValueError):
    """The pattern is one git can never match (unclosed class, trailing backslash,
    unknown ``[:class:]``, longer than any path): git skips it silently, we skip it
    with a warning. ``str(error)`` says why, in words for that warning."""

    def __init__(self, reason: str = _GIT_SKIPS_IT) -> None:
        super().__init__(reason)


class IgnoreRule(NamedTuple):
    """One parsed line of an ignore file.

    ``regex`` matches the whole path relative to the ignore file's directory
    (for ``basename_only`` rules: the entry's name alone).
    """

    pattern: str
    regex: str
    negated: bool
    dir_only: bool
    basename_only: bool


def _class_char(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


def _posix_class(pattern: str, i: int) -> tuple[str, str | None, int]:
    """The ``[:name:]`` at ``pattern[i]`` inside a class: (regex, the character a
    following ``-`` would start a range from, next index). A ``[:`` that is not
    closed by ``:]`` is a literal ``[``."""
    close = pattern.find("]", i + 2)
    if close < 0:
        raise NeverMatchesError
    if close - 1 < i + 2 or pattern[close - 1] != ":":
        return _class_char("["), "[", i + 1
    name = pattern[i + 2 : close - 1]
    if name not in _POSIX_CLASSES:
        raise NeverMatchesError
    return _POSIX_CLASSES[name], None, close + 1


def _translate_class(pattern: str, start: int) -> tuple[str, int]:
    """Translate the ``[...]`` starting at ``pattern[start]``; return (regex, next index)."""
    n = len(pattern)
    i = start + 1
    negated = False
    if i < n and pattern[i] in "!^":
        negated = True
        i += 1
    parts: list[str] = []
    prev: str | None = None
    first = True
    while True:
        if i >= n:
            raise NeverMatchesError
        char = pattern[i]
        if char == "]" and not first:
            i += 1
            break
        first = False
        if char == "\\":
            i += 1
            if i >= n:
                raise NeverMatchesError
            char = pattern[i]
            parts.append(_class_char(char))
            prev = char
            i += 1
            continue
        if char == "-" and prev is not None and i + 1 < n and pattern[i + 1] != "]":
            i += 1
            high = pattern[i]
            if high == "\\":
                i += 1
                if i >= n:
                    raise NeverMatchesError
                high = pattern[i]
            # git compared the low end with the character before it saw the "-", so
            # it stays a member even when the range is empty ([z-a] matches "z").
            if prev <= high:
                parts.append(f"{_class_char(prev)}-{_class_char(high)}")
            prev = None
            i += 1
            continue
        if char == "[" and i + 1 < n and pattern[i + 1] == ":":
            piece, prev, i = _posix_class(pattern, i)
            parts.append(piece)
            continue
        parts.append(_class_char(char))
        prev = char
        i += 1
    body = "".join(parts)
    if negated:
        return f"[^/{body}]", i
    return (f"(?!/)[{body}]" if body else "(?!)"), i


_LONGER_THAN_ANY_PATH = f"it needs more characters than a path has ({LONGEST_PATH})"

# Tokens of a pattern for :func:`_assemble`: a fixed-width piece (a literal, ``?``, a
# class), a literal ``/``, a ``*`` (``[^/]*``), ``**/`` (any directories, maybe none)
# and a final ``/**``'s ``**`` (anything).
_FIXED, _SLASH, _STAR, _DIRS, _REST = range(5)


def translate(pattern: str) -> str:
    """The regex (to be full-matched) of one wildmatch pattern, git's WM_PATHNAME mode.

    ``pattern`` has no leading ``!``, no leading ``/`` and no trailing ``/``.
    Raises :class:`NeverMatchesError` for patterns git can never match.

    The regex never backtracks more than linearly, whatever the pattern: see
    :func:`_assemble` (``a*a*a*a*a*a*a*a*a*a*a*a*a*b`` against a long name of
    ``a`` is one pass, not years).
    """
    if "*" not in pattern and "?" not in pattern and "[" not in pattern and "\\" not in pattern:
        # A fixed path (most lines of a large .gitignore: /git-add): each character
        # stands for itself, "/" included (re.escape leaves it alone).
        if len(pattern) >= LONGEST_PATH:
            raise NeverMatchesError(_LONGER_THAN_ANY_PATH)
        return re.escape(pattern)
    n = len(pattern)
    tokens: list[tuple[int, str]] = []
    i = 0
    while i < n:
        char = pattern[i]
        if char == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_boundary_before = i == 0 or pattern[i - 1] == "/"
            if j - i >= 2 and at_boundary_before and j == n:
                tokens.append((_REST, ".*"))
            elif j - i >= 2 and at_boundary_before and pattern[j] == "/":
                j += 1
                if not tokens or tokens[-1][0] != _DIRS:  # "**/**/" is "**/"
                    tokens.append((_DIRS, "(?:.*/)?"))
            else:
                tokens.append((_STAR, "[^/]*"))
            i = j
        elif char == "?":
            tokens.append((_FIXED, "[^/]"))
            i += 1
        elif char == "[":
            regex, i = _translate_class(pattern, i)
            tokens.append((_FIXED, regex))
        elif char == "\\":
            if i + 1 >= n:
                raise NeverMatchesError
            escaped = pattern[i + 1]
            tokens.append((_SLASH, "/") if escaped == "/" else (_FIXED, re.escape(escaped)))
            i += 2
        elif char == "/":
            tokens.append((_SLASH, "/"))
            i += 1
        else:
            tokens.append((_FIXED, re.escape(char)))
            i += 1
    # Each fixed-width token takes one character: past LONGEST_PATH of them nothing
    # matches, and the tokens left (a "*" or "**/" between two of them) are few.
    if sum(1 for kind, _ in tokens if kind in (_FIXED, _SLASH)) >= LONGEST_PATH:
        raise NeverMatchesError(_LONGER_THAN_ANY_PATH)
    return _assemble(tokens)


def _assemble(tokens: Sequence[tuple[int, str]]) -> str:
    """The regex of ``tokens``, with the choices no later part can undo made once.

    A ``*`` stands before a fixed-width run (the text up to the next ``*``, ``**``
    or the end). When that run holds a ``/``, or another ``*`` follows it, the
    leftmost place where the run matches is as good as any other (the ``*``
    cannot cross a ``/``, and the next ``*`` absorbs what a later place would
    have skipped), so it is taken in an atomic group, ``(?>[^/]*?RUN)``, and
    never tried again. Likewise ``**/`` before a part that ends at another
    ``**``: the leftmost directory where that part matches will do. Only the
    last ``*`` of the last name and the last ``**/`` are left to the regex engine,
    which then backtracks over one of them at a time: O(n·m) per match, where a
    plain translation of ``a*a*...*b`` is O(n^k).
    """
    out: list[str] = []
    count = len(tokens)
    i = 0
    while i < count:
        kind, text = tokens[i]
        if kind in (_FIXED, _SLASH, _REST):
            out.append(text)
            i += 1
            continue
        j = i + 1
        if kind == _STAR:
            while j < count and tokens[j][0] in (_FIXED, _SLASH):
                j += 1
            run = tokens[i + 1 : j]
            body = "".join(piece for _, piece in run)
            settled = (j < count and tokens[j][0] == _STAR) or any(k == _SLASH for k, _ in run)
            out.append(f"(?>[^/]*?{body})" if settled else f"[^/]*{body}")
        else:  # _DIRS
            while j < count and tokens[j][0] not in (_DIRS, _REST):
                j += 1
            inner = _assemble(tokens[i + 1 : j])
            out.append(f"(?>(?:.*?/)??{inner})" if j < count else f"(?:.*/)?{inner}")
        i = j
    return "".join(out)


def _trim_trailing_spaces(line: str) -> str:
    """git's ``trim_trailing_spaces``: drop unescaped trailing spaces."""
    if not line.endswith(" "):
        return line
    last_space: int | None = None
    i = 0
    n = len(line)
    while i < n:
        char = line[i]
        if char == " ":
            if last_space is None:
                last_space = i
        elif char == "\\":
            i += 1
            if i >= n:
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def parse_rule(line: str) -> IgnoreRule | None:
    """Parse one ignore-file line; ``None`` for blanks and comments.

    Raises :class:`NeverMatchesError` for a line git can never match.
    """
    line = line.rstrip("\n")
    if not line or line.startswith("#"):
        return None
    body = _trim_trailing_spaces(line)
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    dir_only = body.endswith("/")
    if dir_only:
        body = body[:-1]
    basename_only = "/" not in body
    if body.startswith("/"):
        body = body[1:]
    if not body:
        return None
    return IgnoreRule(line, translate(body), negated, dir_only, basename_only)
