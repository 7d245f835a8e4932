"""``ollm sessions search``: full-text search over every session."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.padding import Padding
from rich.text import Text

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.sessions._common import ID_PREFIX_LENGTH, JsonOption, open_store, say
from ollm_cli.pipeline.recording import MARK_END, MARK_START, SearchHit


def highlighted(snippet: str, *, start: str, end: str) -> Text:
    """``snippet`` with the text between ``start`` and ``end`` markers shown in reverse bold."""
    text = Text()
    rest = snippet
    while True:
        at = rest.find(start)
        if at < 0:
            break
        stop = rest.find(end, at + len(start))
        if stop < 0:
            break
        text.append(rest[:at])
        text.append(rest[at + len(start) : stop], style="reverse bold")
        rest = rest[stop + len(end) :]
    text.append(rest)
    return text


def _where(hit: SearchHit) -> str:
    if hit.where == "message":
        return f"{hit.role or 'a'} message #{hit.index + 1}"
    if hit.where == "toolCall":
        return f"tool call #{hit.index + 1}"
    return "title, tags or notes"


def search(
    query: Annotated[str, typer.Argument(help="Words to look for in every session.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 20,
    json_output: JsonOption = False,
) -> None:
    """Search the text of every session; best matches first, matches highlighted.

    Every word must match; a word also finds the words it begins (`kube` finds
    kubernetes, whole words first). Text in double quotes is a phrase.

    Example: `ollm sessions search kube deploy`, `ollm sessions search '"docker compose"'`
    """
    if not query.strip():
        raise typer.BadParameter("give at least one word to search for", param_hint="QUERY")
    with open_store(read_only=True) as store:
        hits = store.search(query, limit=limit)
    if json_output:
        print_json(hits)
        return
    if not hits:
        say(f"No session mentions {query!r}.")
        return
    for hit in hits:
        heading = Text.assemble(
            (hit.session_id[:ID_PREFIX_LENGTH], "bold"),
            "  ",
            (hit.title or "(untitled)", "" if hit.title else "dim"),
            (f"  {_where(hit)}", "dim"),
        )
        console.print(heading)
        console.print(
            Padding(highlighted(hit.snippet, start=MARK_START, end=MARK_END), (0, 0, 1, 2))
        )


def register(app: typer.Typer) -> None:
    """Add ``search`` to ``app``."""
    app.command("search")(search)
