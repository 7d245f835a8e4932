"""Markdown that shows what was written and does nothing else.

Text from a model, a tool, an imported file or a user goes into a Markdown export,
and a renderer (a forge, an editor's preview, a static site) must show it, never run
it. :func:`inert_markdown` keeps the text's own Markdown (emphasis, lists, quotes,
code) and, outside code (fenced blocks and code spans, which every renderer shows
literally):

- ``<`` becomes ``&lt;``: every raw HTML construct and every autolink starts with it;
- an ``&`` that would start a character reference becomes ``&amp;`` (``&lt;``
  written stays ``&lt;`` on screen, ``AT&T`` stays as it is);
- in a text that names a ``javascript:``, ``vbscript:`` or ``data:`` scheme
  anywhere, ``[`` and ``]`` become ``&#91;`` and ``&#93;``, so no link or image can
  form (a character reference never counts as Markdown structure).

A fence the text opened and never closed is closed at its end, so it cannot swallow
what the export writes after it. Then, when the result still holds a raw ``<`` (in
code) or names such a scheme, a CommonMark parser checks it: if the parser finds
raw HTML or a link to such a scheme (it read the code regions otherwise than this
module did, say a fence inside a list item), the whole text is fenced instead:
shown whole, inert.

Example::

    >>> inert_markdown('Hi <script>alert(1)</script> & `<b>` [x](javascript:alert(1))')
    'Hi &lt;script>alert(1)&lt;/script> & `<b>` &#91;x&#93;(javascript:alert(1))'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_LINE_END = re.compile(r"(\r\n|\r|\n)")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_SPECIAL = re.compile(r"\\[!-/:-@\[-`{-~]|`+|[<&\[\]]")
_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")
_BACKTICKS = re.compile(r"`+")
_LIVE = re.compile(r"[<&]")
_LIVE_LINKS = re.compile(r"[<&\[\]]")
_SCHEME = re.compile(r"(?<![a-z0-9+.\-])(?:javascript|vbscript|data):")
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f]+")


def fenced(text: str, info: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks in it: shown
    literally by every renderer, whatever it holds (control characters removed
    first, so that none can join two runs of backticks afterwards)."""
    text = strip_control(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def code_span(text: str) -> str:
    """``text`` (one line) as an inline code span that no backtick in it can close."""
    text = strip_control(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def names_a_dangerous_scheme(text: str) -> bool:
    """Whether ``text`` names a ``javascript:``, ``vbscript:`` or ``data:`` scheme,
    control characters (which browsers drop from a URL) and case ignored
    (``metadata:`` is no scheme)."""
    lowered = text.lower()
    if "script" not in lowered and "data" not in lowered and not _INVISIBLE.search(text):
        return False  # the common case, found at the speed of a substring search
    return _SCHEME.search(_INVISIBLE.sub("", lowered)) is not None


def inert_markdown(text: str, *, quote: bool = False) -> str:
    """``text`` as Markdown a renderer shows and never runs (see the module's
    docstring); ``quote`` puts it in a block quote. Control characters are removed
    first: removed afterwards, one could join two runs of backticks."""
    text = strip_control(text)
    no_links = names_a_dangerous_scheme(text)
    shown = "".join(_neutral_pieces(text, no_links=no_links))
    if quote:
        shown = "".join(
            f"> {line}" if line.strip("\r\n") else ">" + line[len(line.rstrip("\r\n")) :]
            for line in shown.splitlines(keepends=True)
        )
    if ("<" in shown or no_links) and not _parses_inert(shown):
        return fenced(text, "text")
    return shown


def inert_inline(text: str) -> str:
    """``text`` on one line, escaped as :func:`inert_markdown` escapes prose, for a
    place where it cannot start a block (after ``# `` or ``- **Title:** ``); a code
    span of its own when a parser still finds something live in it."""
    line = " ".join(strip_control(text).split())
    no_links = names_a_dangerous_scheme(line)
    shown = _escaped(line, no_links=no_links)
    if ("<" in shown or no_links) and not _parses_inert(f"- {shown}"):
        return code_span(line)
    return shown


def _neutral_pieces(text: str, *, no_links: bool) -> Iterator[str]:
    """The text with code kept as written and everything else escaped, piece by piece."""
    pieces = _LINE_END.split(text)
    lines = [
        (pieces[i], pieces[i + 1] if i + 1 < len(pieces) else "") for i in range(0, len(pieces), 2)
    ]
    prose: list[str] = []
    fence: tuple[str, int] | None = None  # the open fence's character and length
    for line, end in lines:
        if fence is None:
            opened = _FENCE_OPEN.fullmatch(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                yield _escaped("".join(prose), no_links=no_links)
                prose = []
                fence = (opened.group(1)[0], len(opened.group(1)))
                yield line + end
            elif line.strip():
                prose.append(line + end)
            else:  # a blank line ends a paragraph, and any code span in it
                yield _escaped("".join(prose), no_links=no_links)
                prose = []
                yield line + end
            continue
        yield line + end
        char, length = fence
        if re.fullmatch(rf" {{0,3}}{re.escape(char)}{{{length},}}[ \t]*", line):
            fence = None
    yield _escaped("".join(prose), no_links=no_links)
    if fence is not None:  # never closed: close it, or it would swallow what follows
        char, length = fence
        yield ("" if text.endswith(("\n", "\r")) or not text else "\n") + char * length + "\n"


def _escaped(prose: str, *, no_links: bool) -> str:
    """Lines of one paragraph with ``<``, references (and brackets) escaped outside
    code spans; a backslash escape is kept as it is (it is already literal)."""
    if not (_LIVE_LINKS if no_links else _LIVE).search(prose):
        return prose  # nothing to escape: most prose, found at the speed of a scan
    out: list[str] = []
    at = 0
    for found in _SPECIAL.finditer(prose):
        start = found.start()
        if start < at:
            continue  # inside a code span already copied
        out.append(prose[at:start])
        token = found.group()
        at = found.end()
        if token[0] == "\\":
            out.append(token)
        elif token[0] == "`":
            closing = re.compile(rf"(?<!`){token}(?!`)").search(prose, at)
            if closing is not None:
                out.append(prose[start : closing.end()])
                at = closing.end()
            else:
                out.append(token)
        elif token == "<":
            out.append("&lt;")
        elif token == "&":
            out.append("&amp;" if _REFERENCE.match(prose, start) else "&")
        elif no_links:
            out.append("&#91;" if token == "[" else "&#93;")
        else:
            out.append(token)
    out.append(prose[at:])
    return "".join(out)


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark")
    parser.validateLink = lambda url: True  # type: ignore[method-assign]  # see every link
    return parser


def _tokens(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _tokens(token.children)


def _parses_inert(markdown: str) -> bool:
    """Whether a CommonMark parser finds no raw HTML and no link to a dangerous scheme."""
    for token in _tokens(_parser().parse(markdown)):
        if token.type in ("html_block", "html_inline"):
            return False
        if token.type in ("link_open", "image"):
            target = str(token.attrGet("href") or token.attrGet("src") or "")
            if names_a_dangerous_scheme(target.strip()):
                return False
    return True
