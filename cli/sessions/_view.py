"""``ollm sessions view`` and ``export``: one session as a transcript on screen or as a
file, streamed in bounded memory.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated

import typer
from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from ollm_cli.cli.output import console, print_json, strip_control
from ollm_cli.cli.sessions._common import (
    ID_PREFIX_LENGTH,
    VIEW_RESULT_LIMIT,
    VIEW_RESULT_LINES,
    JsonOption,
    SessionArg,
    open_store,
    say,
    short_time,
)
from ollm_cli.pipeline.atomic_file import create_new, sibling_temp
from ollm_cli.pipeline.checkpoints import LogEntry, changed_note
from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording import (
    INTERRUPTED_NOTE,
    CompressionMark,
    ExportFormat,
    NoteBlock,
    StreamedSession,
    TextBlock,
    ThinkingBlock,
    ToolCallView,
    TranscriptEntry,
    call_outcome,
    compression_summary,
    describe_compression,
    format_args,
    gc_relaxed,
    html_chunks,
    iter_transcript,
    json_chunks,
    markdown_chunks,
    render,
    session_facts,
    session_heading,
    transcript,
    with_compression_marks,
)
from ollm_cli.pipeline.records import Session


def _truncated(text: str, *, full: bool) -> tuple[str, str | None]:
    if full:
        return text, None
    lines = text.splitlines(keepends=True)
    cut = text
    if len(lines) > VIEW_RESULT_LINES:
        cut = "".join(lines[:VIEW_RESULT_LINES])
    if len(cut) > VIEW_RESULT_LIMIT:
        cut = cut[:VIEW_RESULT_LIMIT]
    if cut == text:
        return text, None
    hidden = len(text) - len(cut)
    return cut, f"… {hidden} more characters not shown (--full shows everything)"


def _call_panel(call: ToolCallView, *, full: bool) -> Panel:
    # the id and outcome in the body, where they wrap (a panel's title is cut to its width)
    parts: list[RenderableType] = [Text(f"{call.id}, {call_outcome(call)}", style="dim")]
    if call.args is not None:
        parts.append(Text("arguments", style="dim"))
        parts.append(Text(format_args(call.args)))
    if call.error:
        parts.append(Text("error", style="dim"))
        parts.append(Text(call.error, style="red"))
    if call.result is not None:
        shown, note = _truncated(call.result, full=full)
        parts.append(Text("result", style="dim"))
        parts.append(Text(shown))
        if note:
            parts.append(Text(note, style="italic yellow"))
    if call.display:
        parts.append(Text("shown to the user", style="dim"))
        parts.append(Text(call.display))
    title = Text.assemble(("tool ", "dim"), (call.name, "bold magenta"))
    return Panel(
        Group(*parts),
        title=title,
        title_align="left",
        border_style="red" if call.is_error else "magenta",
    )


_ROLE_STYLES = {"user": "bold green", "assistant": "bold blue", "system": "bold yellow"}


def _compression_rule(mark: CompressionMark, *, summaries: bool) -> list[RenderableType]:
    shown: list[RenderableType] = [
        _Heading(
            Text.assemble(
                ("⇣ " + describe_compression(mark), "bold cyan"),
                ("  " + short_time(mark.event.timestamp), "dim"),
            ),
            style="cyan",
        )
    ]
    summary = compression_summary(mark.event)
    if summaries and summary:
        shown.append(
            Padding(
                Panel(Text(summary), title="summary sent to the model", border_style="cyan"),
                (0, 0, 0, 2),
            )
        )
    return shown


def session_view(session: Session, *, full: bool = False, summaries: bool = False) -> Group:
    """The session as rich renderables: facts, then each message and its tool calls,
    with a line where each compression happened (and its summary with ``summaries``)."""
    items = view_items(
        session, transcript(session), session_facts(session), full=full, summaries=summaries
    )
    return Group(*items)


def view_items(
    header: Session,
    entries: Iterable[TranscriptEntry],
    facts_list: list[tuple[str, str]],
    *,
    full: bool = False,
    summaries: bool = False,
    changed: Mapping[str, list[LogEntry]] | None = None,
) -> Iterator[RenderableType]:
    """The renderables of a view, one by one (a streamed session is never held whole),
    with a line where each compression of ``header``'s history happened (by time),
    and a dim ``changed: ...`` line under each tool call that changed files
    (``changed``: the lines of the session's workspace checkpoints by tool-call id)."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    for label, value in facts_list:
        facts.add_row(label, Text(value, overflow="fold"))
    yield _FactsPanel(Text(session_heading(header), style="bold"), facts)
    for entry in with_compression_marks(header, entries):
        if isinstance(entry, CompressionMark):
            yield from _compression_rule(entry, summaries=summaries)
            continue
        style = _ROLE_STYLES.get(entry.role, "bold magenta")
        yield _Heading(
            Text.assemble(
                (entry.role, style),
                (" interrupted" if entry.interrupted else "", "bold yellow"),
                ("  " + short_time(entry.timestamp), "dim"),
            )
        )
        for block in entry.blocks:
            if isinstance(block, TextBlock):
                yield _indented(block.text)
            elif isinstance(block, ThinkingBlock):
                yield Padding(Text(block.label, style="dim italic"), (0, 0, 0, 2))
                yield _Indented(block.text, prefix="  ┆ ", style=Style(dim=True, italic=True))
            elif isinstance(block, NoteBlock):
                yield Padding(Text(f"({block.text})", style="dim italic"), (0, 0, 0, 2))
            else:
                yield Padding(_call_panel(block.call, full=full), (0, 0, 0, 2))
                lines = (changed or {}).get(block.call.id)
                if lines:
                    yield _Indented(changed_note(lines), prefix="  ", style=Style(dim=True))
        if entry.interrupted:
            yield Padding(Text(f"⚠ {INTERRUPTED_NOTE}", style="bold yellow"), (0, 0, 0, 2))


class _Heading:
    """A rule with ``title`` on it when the title fits, else a rule and the title
    wrapped under it (a rule cuts a title longer than the width)."""

    def __init__(self, title: Text, *, style: str = "rule.line") -> None:
        self.title = title
        self.style = style

    def __rich_console__(
        self, console: Console, options: ConsoleOptions
    ) -> Iterator[RenderableType]:
        if self.title.cell_len + 6 <= options.max_width:
            yield Rule(self.title, align="left", style=self.style)
        else:
            yield Rule(style=self.style)
            yield self.title


class _FactsPanel:
    """The facts in a panel titled with the session's heading when it fits, else with
    the heading wrapped above them (a panel cuts a title longer than its width)."""

    def __init__(self, heading: Text, facts: Table) -> None:
        self.heading = heading
        self.facts = facts

    def __rich_console__(
        self, console: Console, options: ConsoleOptions
    ) -> Iterator[RenderableType]:
        if self.heading.cell_len + 6 <= options.max_width:
            yield Panel(self.facts, title=self.heading, title_align="left")
        else:
            yield Panel(Group(self.heading, self.facts))


class _Indented:
    """Message text indented by ``prefix``, every line wrapped at the width (at spaces
    where it can), so nothing is cut by the console or the pager, in a pipe as on a
    terminal. Wrapped here, plainly: laying out megabytes of text in rich's own
    wrapper cost minutes."""

    def __init__(self, text: str, *, prefix: str = "  ", style: Style | None = None) -> None:
        self.text = text
        self.prefix = prefix
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        width = max(options.max_width - cell_len(self.prefix), 8)
        for line in strip_control(self.text).split("\n"):
            for piece in wrapped(line.expandtabs(8), width):
                yield Segment(self.prefix + piece if piece else self.prefix.rstrip(), self.style)
                yield Segment.line()


_WORDS = re.compile(r"\s*\S+|\s+$")


def wrapped(line: str, width: int) -> Iterator[str]:
    """``line`` in pieces of at most ``width`` cells, cut at spaces where it can (the
    space a piece ends at is dropped), a word longer than a line cut where it must.

    Example: ``list(wrapped("a bb ccc", 4))`` is ``["a bb", "ccc"]``.
    """
    if line.isascii():  # one cell a character: cut by index, fast on megabytes
        yield from _wrapped_ascii(line, width)
        return
    if cell_len(line) <= width:
        yield line
        return
    piece, used = "", 0
    for token in _WORDS.findall(line):
        size = cell_len(token)
        if used + size <= width:
            piece, used = piece + token, used + size
            continue
        if piece:
            yield piece
        token = token.lstrip()
        if cell_len(token) > width:
            *whole, token = chop_cells(token, width)
            yield from whole
        piece, used = token, cell_len(token)
    if piece or not line:
        yield piece


def _wrapped_ascii(line: str, width: int) -> Iterator[str]:
    start, end = 0, len(line)
    while end - start > width:
        cut = line.rfind(" ", start + 1, start + width + 1)
        if cut < 0:  # a word longer than a line
            yield line[start : start + width]
            start += width
        else:
            yield line[start:cut]
            start = cut + 1
    if start < end or not line:
        yield line[start:]


def _indented(text: str) -> _Indented:
    return _Indented(text)


def _streamed_entries(streamed: StreamedSession) -> Iterator[TranscriptEntry]:
    return iter_transcript(
        streamed.messages(),
        result_ids=streamed.result_ids,
        recorded=streamed.recorded,
        orphans=streamed.orphans,
    )


def _streamed_facts(streamed: StreamedSession) -> list[tuple[str, str]]:
    return session_facts(
        streamed.header, messages=streamed.message_count, tool_calls=streamed.tool_call_count
    )


class _PagerConsole(Console):
    """A console writing into the pager: the reader quitting it ends the view quietly
    (rich's own handling exits with code 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


@contextmanager
def paged_console() -> Iterator[Console]:
    """On a terminal: a console writing into ``$PAGER`` (``less -R``) as the text is
    made, so a long session shows at once and is never held whole; else the console."""
    if not sys.stdout.isatty():
        yield console
        return
    command = shlex.split(os.environ.get("PAGER") or "less -R")
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        pager = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:
        yield console
        return
    assert pager.stdin is not None
    stream = io.TextIOWrapper(pager.stdin, encoding="utf-8", errors="replace")
    paged = _PagerConsole(
        file=stream,
        force_terminal=True,
        width=console.width,
        no_color=console.no_color,
        color_system=console.color_system,  # type: ignore[arg-type]
    )
    try:
        yield paged
    except BrokenPipeError:
        pass  # the reader quit the pager: nothing more to show
    finally:
        with suppress(BrokenPipeError, OSError):
            stream.close()
        pager.wait()


def view(
    session_id: SessionArg,
    raw: Annotated[bool, typer.Option("--raw", help="Print the session file as stored.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Do not shorten long tool results.")] = False,
    summaries: Annotated[
        bool,
        typer.Option(
            "--summaries", help="Show the summary each compression sent to the model in its place."
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Show a whole session, wrapped to the width and never cut: every message,
    reasoning and tool call, with times.

    Interrupted answers are marked, and a line shows where each compression
    happened. Only long tool results are shortened, and say so (`--full` shows
    them whole).

    Example: `ollm sessions view 3f1c2a9e --full | less -R`,
    `ollm sessions view 3f1c2a9e --summaries`
    """
    from ollm_cli.cli.sessions._fork import changed_by_call, family_facts  # branches, files

    with open_store(read_only=True) as store:
        streamed = None if raw or json_output else store.streamed(session_id)
        if streamed is not None:
            changed = changed_by_call(streamed.header.session_id)
            with gc_relaxed(), paged_console() as out:
                for item in view_items(
                    streamed.header,
                    _streamed_entries(streamed),
                    _streamed_facts(streamed),
                    full=full,
                    summaries=summaries,
                    changed=changed,
                ):
                    out.print(item)
            return
        session = store.get_session(session_id)
        family = family_facts(store, session)
        if raw:
            path = store.data_dir / f"{session.session_id}.json"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SessionError(
                    f"cannot read the file of session {session.session_id}: {exc.strerror}",
                    hint="`ollm sessions view ID --json` prints the session as the store has it",
                ) from None
            if sys.stdout.isatty():  # a hand-edited file may hold raw escape bytes
                data = strip_control(data.decode("utf-8", "replace")).encode()
            sys.stdout.buffer.write(data if data.endswith(b"\n") else data + b"\n")
            sys.stdout.flush()
            return
    if json_output:
        print_json(session)
        return
    with paged_console() as out:
        for item in view_items(
            session,
            transcript(session),
            session_facts(session) + family,
            full=full,
            summaries=summaries,
            changed=changed_by_call(session.session_id),
        ):
            out.print(item)


def export_chunks(streamed: StreamedSession, fmt: ExportFormat) -> Iterator[str]:
    """The export of a streamed session, piece by piece."""
    if fmt is ExportFormat.JSON:
        return json_chunks(streamed.header, streamed.raw_messages(), streamed.raw_tool_calls())
    entries = _streamed_entries(streamed)
    facts = _streamed_facts(streamed)
    if fmt is ExportFormat.MARKDOWN:
        return markdown_chunks(streamed.header, entries, facts)
    return html_chunks(streamed.header, entries, facts)


def export(
    session_id: SessionArg,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="json (re-importable), markdown, html.")
    ] = ExportFormat.MARKDOWN,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to this file instead of stdout.", dir_okay=False
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --output if it exists.")
    ] = False,
) -> None:
    """Export a whole session (never shortened) as JSON, Markdown or one HTML file.

    Example: `ollm sessions export 3f1c2a9e --format html --output chat.html`
    """
    with open_store(read_only=True) as store:
        streamed = store.streamed(session_id)
        session = store.get_session(session_id) if streamed is None else streamed.header
    chunks: Iterable[str] = (
        [render(session, fmt)] if streamed is None else export_chunks(streamed, fmt)
    )
    if output is None:
        with gc_relaxed():
            for chunk in chunks:
                sys.stdout.write(strip_control(chunk))
        sys.stdout.flush()
        return
    if output.exists() and not force:
        raise SessionError(
            f"{output} already exists; not overwriting it",
            hint="choose another --output, or pass --force to replace it",
        )
    partial = sibling_temp(output, ".partial")  # made new, never through a planted link
    try:
        with (
            os.fdopen(create_new(partial, 0o666), "w", encoding="utf-8") as handle,
            gc_relaxed(),
        ):
            for chunk in chunks:
                handle.write(chunk)
        partial.replace(output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise SessionError(
            f"cannot write {output}: {exc.strerror}",
            hint="check the folder exists and is writable, or export to stdout",
        ) from None
    say(
        f"Exported session {session.session_id[:ID_PREFIX_LENGTH]} as {fmt.value} to {output}",
        err=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``view``, ``export`` to ``app``."""
    app.command("view")(view)
    app.command("export")(export)
