"""The resume picker of ``ollm run --resume`` and ``/resume``: choose a session to go on with.

On a terminal it is an inline list (prompt_toolkit): typing filters it (by title,
tags and id at once, and by the text of every message through the session
store's search, which matches words by their beginning), the arrows move, Enter
resumes the selected session, Esc starts a new one, and a preview below the list
shows the selected session's last messages. Elsewhere (a pipe, a script) it is a
numbered list that asks for a number, an id, or words to filter by.

Sessions without a message are not offered. Each session is one line that fits
the terminal (its title cut with "…"); titles, snippets and messages pass through
:func:`~ollm_cli.pipeline.terminal_text.strip_control`: a recorded escape
sequence never reaches the terminal.

Example::

    session_id = pick_session(loop, coordinator, err_console, input)  # None: a new one
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.markup import escape

from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.pipeline.contract import ConversationContract
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import MARK_END, MARK_START, SearchHit
from ollm_cli.pipeline.records import Session, SessionSummary
from ollm_cli.pipeline.terminal_text import strip_control

OFFERED = 200
"""How many of the most recent sessions the picker lists (older ones are found by
their text)."""
SEARCHED = 50
ELLIPSIS = "…"
PREVIEW_MESSAGES = 4
_ID_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,}")


def one_line(text: str) -> str:
    """``text`` shown on one line: control sequences stripped, whitespace collapsed."""
    return " ".join(strip_control(text).split())


def imported_notice(session_id: str, tags: list[str] | tuple[str, ...]) -> str | None:
    """What to say (rich markup) when a session about to be resumed was imported: its
    history was written elsewhere, yet goes to the model as the conversation so far
    (``None`` when it was recorded here). The importer tags it ``imported:<tool>``."""
    tools = [tag.removeprefix("imported:") for tag in tags if tag.startswith("imported:")]
    if not tools:
        return None
    return (
        f"[yellow]continuing an imported session (from {escape(one_line(tools[0]))}, not "
        f"recorded here): what it holds goes to the model as the conversation so far; "
        f"`ollm sessions view {session_id[:8]}` shows it[/]"
    )


def fit(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells, cut with "…" when longer."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1).rstrip() + ELLIPSIS


@dataclass(frozen=True)
class Choice:
    """One session the picker offers; ``snippet`` is the text that matched a filter."""

    session_id: str
    title: str
    last_activity: str
    message_count: int | None
    tags: tuple[str, ...] = ()
    snippet: str | None = None

    @classmethod
    def of(cls, summary: SessionSummary) -> Choice:
        return cls(
            session_id=summary.session_id,
            title=one_line(summary.title or ""),
            last_activity=summary.last_activity,
            message_count=summary.message_count,
            tags=tuple(one_line(tag) for tag in summary.tags),
        )

    def line(self, width: int) -> str:
        """The choice as one line of at most ``width`` cells: id, title (and what
        matched), last activity, number of messages."""
        when = self.last_activity[5:16].replace("T", " ")
        count = "" if self.message_count is None else f"{self.message_count} msg"
        tail = f"  {when}  {count:>8}" if width >= 60 else f"  {count:>8}"
        room = width - 8 - 2 - cell_len(tail)
        title = self.title or "(untitled)"
        if self.tags:
            title += "  #" + " #".join(self.tags)
        if self.snippet:  # what matched stays in sight: the title takes half the room
            title = fit(title, max(10, room // 2)) + "  · " + self.snippet
        body = set_cell_size(fit(title, room), room) if room > 0 else ""
        return fit(f"{self.session_id[:8]}  {body}{tail}", width)


class SessionChoices:
    """The sessions offered, and those a filter leaves (see the module)."""

    def __init__(
        self,
        sessions: list[SessionSummary],
        search: Callable[[str], list[SearchHit]],
    ) -> None:
        self.all = [Choice.of(s) for s in sessions if s.message_count > 0]
        self._search = search
        self._found: dict[str, list[Choice]] = {}

    def matching(self, query: str) -> list[Choice]:
        """The choices for ``query``: first those whose title, tags or id hold every
        word (most recent first), then those whose messages do (best match first)."""
        words = query.casefold().split()
        if not words:
            return list(self.all)
        key = " ".join(words)
        if key in self._found:
            return self._found[key]
        direct = [c for c in self.all if all(w in _haystack(c) for w in words)]
        taken = {c.session_id for c in direct}
        known = {c.session_id: c for c in self.all}
        by_text: list[Choice] = []
        try:
            hits = self._search(query)
        except OllmError:  # no word to look for (only punctuation), a store that fails
            hits = []
        for hit in hits:
            if hit.session_id in taken:
                continue
            snippet = one_line(hit.snippet.replace(MARK_START, "").replace(MARK_END, ""))
            base = known.get(hit.session_id)
            if base is None:
                if hit.where == "metadata":  # an older session: offered for its text only
                    continue
                base = Choice(hit.session_id, one_line(hit.title or ""), hit.last_activity, None)
            by_text.append(
                Choice(
                    base.session_id,
                    base.title,
                    base.last_activity,
                    base.message_count,
                    base.tags,
                    snippet,
                )
            )
            taken.add(hit.session_id)
        self._found[key] = found = direct + by_text
        return found


def _haystack(choice: Choice) -> str:
    return " ".join([choice.session_id, choice.title, *choice.tags]).casefold()


def preview_lines(session: Session, width: int, count: int = PREVIEW_MESSAGES) -> list[str]:
    """The last ``count`` messages with text, one line each (``you:`` / ``model:``)."""
    shown = [m for m in session.messages if m.role in {"user", "assistant"} and m.text.strip()]
    lines = []
    for message in shown[-count:]:
        who = "you:   " if message.role == "user" else "model: "
        lines.append(fit(who + one_line(message.text), width))
    return lines


def pick_session(
    loop: LoopThread,
    coordinator: ConversationContract,
    err: Console,
    read_line: Callable[[str], str],
    *,
    terminal: bool | None = None,
) -> str | None:
    """Let the user choose a session to resume (``None``: start a new one).

    ``terminal`` (default: whether stdin and stdout both are one) chooses the
    inline list; otherwise the numbered one, read with ``read_line``."""
    recent = loop.run(coordinator.recent_sessions(OFFERED, with_messages=True))
    choices = SessionChoices(
        recent, lambda query: loop.run(coordinator.search_sessions(query, SEARCHED))
    )
    if not choices.all:
        err.print("[dim]no sessions with messages yet: starting a new one[/]")
        return None
    if terminal is None:
        terminal = sys.stdin.isatty() and sys.stdout.isatty()
    cache: dict[str, list[str]] = {}

    def preview(session_id: str, width: int) -> list[str]:
        if session_id not in cache:
            try:
                cache[session_id] = preview_lines(
                    loop.run(coordinator.get_session(session_id)), width
                )
            except OllmError as error:
                cache[session_id] = [fit(f"(cannot read it: {one_line(str(error))})", width)]
        return cache[session_id]

    pick = _screen_pick if terminal else _numbered_pick
    chosen = pick(choices, preview, err, read_line)
    if chosen is not None:
        picked = next((c for c in choices.all if c.session_id == chosen), None)
        title = picked.title if picked is not None else ""
        err.print(f"[dim]resuming {chosen[:8]} {escape(fit(title, 60))}[/]")
        notice = imported_notice(chosen, picked.tags if picked is not None else ())
        if notice is not None:
            err.print(notice)
    return chosen


def _numbered_pick(
    choices: SessionChoices,
    preview: Callable[[str, int], list[str]],
    err: Console,
    read_line: Callable[[str], str],
) -> str | None:
    """The picker without a terminal: a numbered list; words filter it, a number or an
    id chooses, an empty answer (or the end of input) starts a new session."""
    shown = choices.matching("")
    while True:
        width = max(40, err.width - 5)
        for number, choice in enumerate(shown[:20], 1):
            err.print(f"{number:>3}  {escape(choice.line(width))}", highlight=False)
        if len(shown) > 20:
            err.print(f"[dim]     and {len(shown) - 20} more: type words to filter[/]")
        try:
            answer = read_line("resume which? (number, id, words to filter, Enter for new) ")
        except EOFError:
            return None
        answer = answer.strip()
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= min(len(shown), 20):
            return shown[int(answer) - 1].session_id
        by_id = [c for c in choices.all if c.session_id.startswith(answer.lower())]
        if len(by_id) == 1:
            return by_id[0].session_id
        if not by_id and _ID_PREFIX.fullmatch(answer.lower()) and not choices.matching(answer):
            return answer  # an older session's id: resuming it says if there is none
        found = choices.matching(answer)
        if not found:
            err.print(f"[yellow]no session matches '{escape(one_line(answer))}'[/]")
            continue
        shown = found


HELP_LINE = "type to filter · ↑↓ move · Enter resumes · Esc starts a new session"
ROWS = 10


class _Selection:
    """The filtered list, the selected row and the first row shown."""

    def __init__(self, choices: SessionChoices) -> None:
        self.choices = choices
        self.shown = choices.matching("")
        self.at = 0
        self.top = 0

    def refilter(self, query: str) -> None:
        self.shown, self.at, self.top = self.choices.matching(query), 0, 0

    def move(self, by: int) -> None:
        if self.shown:
            self.at = min(max(0, self.at + by), len(self.shown) - 1)
            self.top = max(min(self.top, self.at), self.at - ROWS + 1)

    @property
    def selected(self) -> Choice | None:
        return self.shown[self.at] if self.shown else None


def _screen_pick(
    choices: SessionChoices,
    preview: Callable[[str, int], list[str]],
    err: Console,
    read_line: Callable[[str], str],
) -> str | None:
    """The picker on a terminal: a filter line, the list, the selection's preview."""
    from prompt_toolkit.application import Application, get_app
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.layout import HSplit, Layout, Window
    from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl

    selection = _Selection(choices)

    def width() -> int:
        return max(20, get_app().output.get_size().columns - 1)

    def listing() -> StyleAndTextTuples:
        if not selection.shown:
            return [("", "  no session matches: Esc starts a new one")]
        cols = width()
        lines: StyleAndTextTuples = []
        end = min(selection.top + ROWS, len(selection.shown))
        for index in range(selection.top, end):
            mine = index == selection.at
            line = ("❯ " if mine else "  ") + selection.shown[index].line(cols - 2)
            lines += [("reverse" if mine else "", line), ("", "\n")]
        return lines[:-1]

    def previewed() -> StyleAndTextTuples:
        chosen = selection.selected
        if chosen is None:
            return []
        return [("", "\n".join(preview(chosen.session_id, width())))]

    query = Buffer(multiline=False, on_text_changed=lambda b: selection.refilter(b.text))
    keys = KeyBindings()
    for key, step in (("up", -1), ("down", 1), ("pageup", -ROWS), ("pagedown", ROWS)):
        keys.add(key)(lambda event, step=step: selection.move(step))

    @keys.add("enter")
    def _resume(event: KeyPressEvent) -> None:
        if selection.selected is not None:
            event.app.exit(result=selection.selected.session_id)

    @keys.add("escape")
    def _new(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    @keys.add("c-c")
    @keys.add("c-d")
    def _leave(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    def header() -> StyleAndTextTuples:
        return [("bold", fit("resume a session: " + HELP_LINE, width()))]

    layout = Layout(
        HSplit(
            [
                Window(FormattedTextControl(header), height=1),
                Window(
                    BufferControl(query),
                    height=1,
                    get_line_prefix=lambda line, wrap: [("bold", "filter › ")],
                ),
                Window(FormattedTextControl(listing), height=ROWS),
                Window(char="─", height=1),
                Window(FormattedTextControl(previewed), height=PREVIEW_MESSAGES),
            ]
        ),
        focused_element=query,
    )
    app: Application[str | None] = Application(
        layout=layout, key_bindings=keys, full_screen=False, erase_when_done=True
    )
    app.ttimeoutlen = 0.05  # Esc alone is answered at once, not after half a second
    return app.run()
