"""The chat's line editor: prompt_toolkit when stdin and stdout are terminals.

What a user of a Python REPL expects: arrows and Emacs keys, Ctrl-R to search
the history (kept across sessions in ``OLLM_HOME/chat-history``, a file 0600 in a
0700 folder, secrets redacted before they are written, the last
:data:`HISTORY_ENTRIES` entries kept), Tab to complete slash
commands and, after ``/resume``, session ids; Alt-Enter, or a trailing ``\\``
before Enter, goes on to a new line; a bracketed paste of any size arrives as one
message; Ctrl-L clears the screen; Ctrl-C clears the line; Ctrl-D on an empty line
leaves. When stdin or stdout is not a terminal the chat keeps plain ``input()``.

The main thread reads the chat's lines with :meth:`LineEditor.read`; a tool's
approval question comes from the pipeline's loop thread while the main thread
waits for the turn, and :meth:`LineEditor.ask` answers it there with a prompt of
its own (no history, no completion).

Example::

    editor = terminal_line_editor(ollm_home(), commands=["/help", "/exit"])
    line = editor.read("› ") if editor else input("› ")
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import is_searching
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from ollm_cli.base.atomic_file import write_atomic
from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.environment import redact

HISTORY_FILE = "chat-history"
"""The history's file name in ``OLLM_HOME``."""

HISTORY_ENTRIES = 1000
"""How many entries the history keeps: the oldest go when a chat opens it with more
(a bracketed paste is one entry, so the file does not grow without end)."""

# prompt_toolkit's file: an entry is a ``# time`` line, then its lines, each after "+".
_ENTRY_START = re.compile(rb"^# ", re.MULTILINE)


class RedactedFileHistory(FileHistory):
    """prompt_toolkit's history file, private (0600) and without secrets: each
    entry goes through the project's redactor before it is appended."""

    def __init__(self, path: Path) -> None:
        ensure_private_dir(path.parent)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(descriptor)
        path.chmod(0o600)  # a file made before, with the umask's mode
        keep_last_entries(path, HISTORY_ENTRIES)
        super().__init__(str(path))

    def store_string(self, string: str) -> None:
        super().store_string(redact(string))


def keep_last_entries(path: Path, count: int) -> None:
    """Drop all but the last ``count`` (one or more) entries of the history file at
    ``path``, atomically (a crash leaves the old file or the new one)."""
    data = path.read_bytes()
    starts = [found.start() for found in _ENTRY_START.finditer(data)]
    if len(starts) <= count:
        return
    write_atomic(path, b"\n" + data[starts[-count] :])


class ChatCompleter(Completer):
    """Completes a slash command's name, and a session id after ``/resume ``."""

    def __init__(self, commands: Iterable[str], session_ids: Callable[[], list[str]]) -> None:
        self.commands = sorted(set(commands))
        self.session_ids = session_ids

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            for command in self.commands:
                if command.startswith(text):
                    yield Completion(command, start_position=-len(text))
            return
        name, _, rest = text.partition(" ")
        if name != "/resume" or " " in rest:
            return
        for session_id in self.session_ids():
            if session_id.startswith(rest):
                yield Completion(session_id[:8], start_position=-len(rest), display_meta=None)


def chat_key_bindings() -> KeyBindings:
    """Alt-Enter inserts a newline; Enter after a trailing ``\\`` replaces it with one."""
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("enter", filter=~is_searching)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        before = buffer.document.text_before_cursor
        if before.endswith("\\") and buffer.document.is_cursor_at_the_end:
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    return bindings


def prompt_text(prompt: str) -> FormattedText:
    """The prompt as drawn: coloured, so that its trailing space is written as a
    space (an unstyled one is a cursor movement), as ``input()`` wrote it. Once the
    line is accepted prompt_toolkit redraws it whole; that redraw writes the
    prompt's last character in a style of its own (it looks the same), so a script
    that waits for the prompt (``expect("› ")``) finds the next one, not the
    accepted line."""
    if get_app().is_done:
        return FormattedText([("class:prompt", prompt[:-1]), ("class:prompt-done", prompt[-1:])])
    return FormattedText([("class:prompt", prompt)])


class LineEditor:
    """The chat's input on a terminal: one prompt_toolkit session for the chat's
    lines, and a plain one for questions. ``terminal_input`` and ``terminal_output``
    replace the process's terminal (prompt_toolkit's pipe input, in tests)."""

    def __init__(
        self,
        history_path: Path,
        commands: Iterable[str],
        session_ids: Callable[[], list[str]] = list,
        *,
        terminal_input: Input | None = None,
        terminal_output: Output | None = None,
    ) -> None:
        self.history_path = history_path
        self._input, self._output = terminal_input, terminal_output
        self.session = PromptSession[str](
            input=terminal_input,
            output=terminal_output,
            history=RedactedFileHistory(history_path),
            completer=ChatCompleter(commands, session_ids),
            complete_while_typing=False,
            key_bindings=chat_key_bindings(),
            enable_history_search=False,
            multiline=False,
            prompt_continuation=lambda width, line, wrapped: "· ".rjust(width),
            style=Style.from_dict({"prompt": "fg:ansicyan", "prompt-done": "fg:ansicyan bold"}),
        )

    def read(self, prompt: str) -> str:
        """One message (one or more lines). Raises EOFError for Ctrl-D on an empty
        line, KeyboardInterrupt for Ctrl-C."""
        # what another thread prints meanwhile (a compression finishing in the
        # background) goes above the prompt, not into it
        with patch_stdout(raw=True):
            return self.session.prompt(lambda: prompt_text(prompt))

    def ask(self, question: str) -> str:
        """A short answer to ``question``, from any thread (Ctrl-C or Ctrl-D: EOFError)."""
        if question.startswith("\n"):  # the prompt is drawn on a line of its own
            sys.stdout.write("\n")
            sys.stdout.flush()
            question = question[1:]
        try:
            return PromptSession[str](input=self._input, output=self._output).prompt(question)
        except KeyboardInterrupt as interrupt:
            raise EOFError("the question was cancelled") from interrupt


def on_terminal() -> bool:
    """Whether both stdin and stdout are terminals (the line editor's condition)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def terminal_line_editor(
    home: Path, commands: Iterable[str], session_ids: Callable[[], list[str]] = list
) -> LineEditor | None:
    """A :class:`LineEditor` keeping its history in ``home``, or None when stdin or
    stdout is not a terminal (then the chat reads with ``input()``)."""
    if not on_terminal():
        return None
    return LineEditor(home / HISTORY_FILE, commands, session_ids)
