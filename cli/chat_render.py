"""How the chat shows an answer while it streams, a tool call, and the final Markdown.

:class:`StreamWriter` writes a model's text as it arrives and wraps it at word
boundaries: a word that would cross the terminal's edge starts the next line
(a word wider than the whole line is cut at the edge), so no word is broken in
two by the terminal. It counts the rows it wrote, so that when the answer is
done :meth:`StreamWriter.finish` can, on a terminal, redraw the final answer as
rendered Markdown in their place (when the answer holds Markdown, all its rows
are still on the screen, and nothing else printed meanwhile). The recorded text
is never touched: only what the screen shows changes, and every piece of it
goes through the console's control-sequence stripping (see ``cli/output.py``).

:func:`tool_call_lines` is a tool call's header and, on lines of their own under
it, the first lines of its output, with "… N more lines" for the rest.

Example::

    writer = StreamWriter(console)
    for delta in ("Hello, ", "wor", "ld"):
        writer.write(delta)
    writer.finish(markdown=True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleRenderable, RenderHook
from rich.markup import escape

from ollm_cli.pipeline.events import ToolCallEvent
from ollm_cli.pipeline.terminal_text import strip_control

EDGE_MARGIN = 16
"""How near the edge (in cells) a growing word waits to be whole before it is shown."""

TOOL_OUTPUT_LINES = 6
"""How many lines of a tool's output the chat shows under its header."""

_MARKDOWN = re.compile(
    r"^\s{0,3}(#{1,6}\s|[-*+]\s|\d+[.)]\s|>|```|~~~|\|.*\|)|\*\*\S|`[^`\n]+`|\[[^\]\n]+\]\(",
    re.MULTILINE,
)


def looks_like_markdown(text: str) -> bool:
    """Whether ``text`` uses Markdown (headings, lists, quotes, code, emphasis, links,
    tables), so that rendering it changes what the user sees."""
    return _MARKDOWN.search(text) is not None


class _Interleaved(RenderHook):
    """Notes that a watched console printed (a log line, a warning) while an answer
    streamed: the rows counted are then not all the answer's."""

    def __init__(self) -> None:
        self.seen = False
        self.own = False
        """Set while the writer prints the answer itself (on its own console)."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        if not self.own:
            self.seen = True
        return renderables


class StreamWriter:
    """Streamed text, wrapped at word boundaries at the console's width.

    A word is shown as it grows while its end stays :data:`EDGE_MARGIN` cells or
    more from the edge; nearer the edge its characters wait until it is whole, and
    a whole word that would cross the edge starts the next line.
    """

    def __init__(self, console: Console, watched: Sequence[Console] = ()) -> None:
        self.console = console
        self.watched = (console, *watched)
        """The consoles on the same screen (its own, stderr's): a line another print
        puts among the answer's rows forbids the Markdown redraw, which counts rows."""
        self._interleaved = _Interleaved()
        self.text = ""
        """The text of the current segment (since :meth:`start`), as received."""
        self.rows = 0
        """How many line breaks were written in the current segment."""
        self._column = 0
        self._pending = ""  # the current word's characters not shown yet
        self._word_shown = False  # some of the current word is on screen already
        self._word_start = 0
        self._width = 80
        self._active = False

    @property
    def active(self) -> bool:
        """Whether a segment is being written (text came since the last finish)."""
        return self._active

    def start(self) -> None:
        """Begin a segment at the start of a line."""
        self.text = ""
        self.rows = 0
        self._column = 0
        self._pending = ""
        self._word_shown = False
        self._width = max(self.console.width, 10)
        self._active = True
        self._interleaved = _Interleaved()
        for other in self.watched:
            other.push_render_hook(self._interleaved)

    def write(self, text: str) -> None:
        """Show ``text`` (control sequences stripped), wrapped at word boundaries."""
        if not self._active:
            self.start()
        text = strip_control(text)
        self.text += text
        out: list[str] = []
        for char in text:
            if char == "\n":
                self._end_word(out)
                self._newline(out)
            elif char in " \t":
                self._end_word(out)
                if self._column + 1 > self._width:
                    self._newline(out)
                else:
                    out.append(" ")
                    self._column += 1
            else:
                if not self._pending and not self._word_shown:
                    self._word_start = self._column
                self._pending += char
                if self._word_start + self._word_cells() < self._width - EDGE_MARGIN:
                    out.append(self._pending)
                    self._column += cell_len(self._pending)
                    self._pending = ""
                    self._word_shown = True
        self._print("".join(out))

    def _word_cells(self) -> int:
        return self._column - self._word_start + cell_len(self._pending)

    def _end_word(self, out: list[str]) -> None:
        """Show the word's waiting characters: on the next line when the whole word
        would cross the edge, cut at the edge when it is wider than a line."""
        word, self._pending = self._pending, ""
        shown, self._word_shown = self._word_shown, False
        if not word:
            return
        if not shown and self._column > 0 and self._column + cell_len(word) > self._width:
            self._newline(out)
        for char in word:
            if self._column + cell_len(char) > self._width:
                self._newline(out)
            out.append(char)
            self._column += cell_len(char)

    def _newline(self, out: list[str]) -> None:
        out.append("\n")
        self.rows += 1
        self._column = 0

    def _print(self, text: str) -> None:
        if text:
            self._interleaved.own = True
            try:
                self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
            finally:
                self._interleaved.own = False

    def finish(self, *, markdown: bool = False) -> None:
        """End the segment on a new line; with ``markdown``, on a terminal, redraw it
        as rendered Markdown when it uses Markdown and is still wholly on screen."""
        if not self._active:
            return
        out: list[str] = []
        self._end_word(out)
        self._print("".join(out))
        self._stop()
        redraw = (
            markdown
            and not self._interleaved.seen
            and self.console.is_terminal
            and looks_like_markdown(self.text)
            and self.rows + 1 < self.console.height
        )
        if not redraw:
            self.console.print()
            return
        # back to the segment's first row, erase to the end of the screen, render
        up = f"\x1b[{self.rows}A" if self.rows else ""
        self.console.file.write("\r" + up + "\x1b[J")
        from rich.markdown import Markdown  # pygments and markdown-it: only when drawn

        self.console.print(Markdown(self.text.strip("\n")))

    def abandon(self) -> None:
        """Forget the segment without finishing it (the turn was interrupted)."""
        self._pending = ""
        self._word_shown = False
        self._stop()

    def _stop(self) -> None:
        if not self._active:
            return
        self._active = False
        for other in self.watched:
            other.pop_render_hook()


def tool_call_lines(event: ToolCallEvent, limit: int = TOOL_OUTPUT_LINES) -> list[str]:
    """A tool call as rich markup: its header (name, outcome, time), then the first
    ``limit`` lines of its output indented under it, and how many more there were."""
    mark = "[green]✓[/]" if event.success else "[red]✗[/]"
    took = f" {event.duration_ms:.0f} ms" if event.duration_ms is not None else ""
    lines = [f"[dim]⚙ {escape(event.name)}[/] {mark}{took}"]
    output = strip_control(event.display or event.error or "").rstrip("\n")
    if not output.strip():
        return lines
    shown = output.split("\n")
    rest = len(shown) - limit
    if rest > 1:
        shown = shown[:limit]
    lines.extend(f"  [dim]{escape(line)}[/]" for line in shown)
    if rest > 1:
        lines.append(f"  [dim]… {rest} more lines[/]")
    return lines
