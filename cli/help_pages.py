"""How every ``ollm`` help page reads: flags without a value placeholder, and
examples one per line.

typer labels every option with its type, flags included (``--json <bool>``), which
invites ``--json true`` (refused: a flag takes no value). And the examples that
docstrings write as prose (```ollm a`, `ollm b` ``) run together on one line. Both
are fixed here, once, for every command as it is loaded (:class:`~ollm_cli.cli.lazy.LazyGroup`
calls :func:`tidy`), so a command module keeps writing its help as prose.

Example::

    >>> print(examples_one_per_line("Show it.\\n\\nExamples: `ollm a`, then `ollm b --x`."))
    Show it.
    <BLANKLINE>
    Examples:
    <BLANKLINE>
    - `ollm a`
    - `ollm b --x`
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from typer.core import TyperGroup, TyperOption

if TYPE_CHECKING:  # typer ships its own copy of click
    from typer._click.core import Command, Context

_EXAMPLES = re.compile(r"\b(?P<lead>Examples?:)[ \t]*(?P<body>.+?)(?=\n[ \t]*\n|\Z)", re.DOTALL)
_CODE = re.compile(r"`[^`]+`")
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")
_JOINERS = re.compile(r"(?:[\s,;.]|\b(?:then|and|or)\b)+$")


def examples_one_per_line(text: str) -> str:
    """``text`` with its example paragraph(s) as a list, one command per line."""
    # a docstring with text appended (the exit codes) keeps its indentation, which
    # markdown would read as a code block: help pages are prose, so lines start flush
    flush = "\n".join(line.strip() for line in text.strip().splitlines())
    return _BLANK_LINES.sub("\n\n", _EXAMPLES.sub(_listed, flush))


def _listed(match: re.Match[str]) -> str:
    body = " ".join(match["body"].split())
    spans = list(_CODE.finditer(body))
    if not spans:
        return match[0]
    # the examples are the code of their own sentence: the prose after it (which may
    # name commands too: "until you run `ollm trust` again") stays a paragraph
    inside = [range(span.start(), span.end()) for span in spans]
    rest = ""
    for end in _SENTENCE_END.finditer(body, spans[0].end()):
        if not any(end.start() in code for code in inside):
            body, rest = body[: end.start()], body[end.end() :]
            spans = [span for span in spans if span.end() <= len(body)]
            break
    lead = body[: spans[0].start()].strip()
    items = [
        _JOINERS.sub("", body[span.start() : following.start() if following else len(body)])
        for span, following in zip(spans, [*spans[1:], None], strict=True)
    ]
    heading = "Examples:" if len(items) > 1 else "Example:"
    intro = f"{heading} {lead}" if lead else heading
    listed = f"\n\n{intro}\n\n" + "\n".join(f"- {item}" for item in items)
    return f"{listed}\n\n{rest}" if rest else listed


def tidy(command: Command, ctx: Context) -> None:
    """Fix the help of ``command`` and of the commands below it (see the module's doc).

    ``ctx`` is the parent's context: it holds the help option names the command's
    own ``--help`` will use.
    """
    from ollm_cli.cli.lazy import LazyGroup

    if command.help:
        command.help = examples_one_per_line(command.help)
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = "markdown"  # the lists above, and `code` shown as code
    for param in [*command.params, command.get_help_option(ctx)]:
        if isinstance(param, TyperOption) and param.is_flag and not param.count:
            param.metavar = ""
    if isinstance(command, TyperGroup) and not isinstance(command, LazyGroup):
        for sub in command.commands.values():
            tidy(sub, ctx)
