"""The command's two rich consoles (stdout, stderr), which strip control sequences
from every text they print.

Imported when a command first prints through rich (:mod:`ollm_cli.cli.output`
hands them out): a warm ``ollm run -p`` in a pipe prints nothing that needs rich,
and does not import it (rich's console is as long to import as the rest of the
command's output).

Example::

    from ollm_cli.cli.output import err_console   # this module, on first use
    err_console.print("[dim]hint:[/] ...")
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

from ollm_cli.pipeline.terminal_text import strip_control


class SafeConsole(Console):
    """A rich console that strips control sequences from every piece of text it prints.

    Rich's own styling and cursor movement (its control segments) pass; text from
    a model, a tool, a file or an imported session never reaches the terminal
    with an escape sequence in it (clearing the screen, retitling the window,
    OSC 52 writing the clipboard).
    """

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(strip_control(segment.text), segment.style)
            for segment in buffer
        )


# emoji off: a ":smile:" in a notice, a title or a path is shown as it is written (and
# rich's table of emoji codes is not imported by the first line a command prints)
console: Console = SafeConsole(highlight=False, emoji=False)
err_console: Console = SafeConsole(stderr=True, highlight=False, emoji=False)

__all__ = ["SafeConsole", "console", "err_console"]
