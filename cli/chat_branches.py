"""The chat's ``/fork [N]`` and ``/rewind``: go back without losing anything.

``/fork [N]`` forks the session at message N (default: all of it) and continues
in the fork. ``/rewind`` lists your earlier messages (as the resume picker lists
sessions), asks which one to go back to and what to restore (conversation and
files, conversation only, files only), restores the files the tools changed
since (asking about files you changed yourself), continues in a fork and puts
that message back on the prompt to edit and send again. The abandoned branch
stays resumable by its id.

Both work the same whether the conversation runs in the service or in this
process: the fork is made by this process's own store, as ``ollm sessions
fork`` makes it (a reader of the session, which another client may hold).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.markup import escape

from ollm_cli.cli.state import loaded_settings
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.branching import Branching, RewindResult
from ollm_cli.pipeline.checkpoints import (
    ChangeLog,
    RewindConflict,
    WorkspaceCheckpoints,
    changed_note,
)
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:
    from ollm_cli.cli.chat_repl import ChatRepl

MODES = {"1": "conversation and files", "2": "conversation only", "3": "files only"}
_SHOWN = 70


@contextlib.contextmanager
def _branches() -> Iterator[Branching]:
    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        yield Branching(store, settings)
    finally:
        store.close()


def _switch(repl: ChatRepl, session_id: str) -> None:
    """Leave the current session (its background work finished) and resume ``session_id``."""
    from ollm_cli.cli.chat_repl import finish_compressions

    finish_compressions(repl.loop, repl.coordinator, repl.err)
    repl.loop.run(repl.coordinator.end_session(repl.session_id))
    repl.session_id = repl.loop.run(repl.coordinator.start_session(resume=session_id))


def fork_command(repl: ChatRepl, args: list[str]) -> None:
    """``/fork [N]``: continue in a fork of this session holding its first N messages."""
    at: int | None = None
    if args:
        if not args[0].isdigit():
            repl.err.print("usage: /fork [N] (N: how many messages to keep; default all)")
            return
        at = int(args[0])
    parent = repl.session_id
    with _branches() as branches:
        result = branches.fork(parent, at=at)
    _switch(repl, result.session_id)
    repl.console.print(
        f"[dim]forked {parent[:8]} at message {result.message_count}: now in "
        f"{result.session_id[:8]} ({parent[:8]} is kept as it was)[/]"
    )


def rewind_command(repl: ChatRepl, args: list[str]) -> str | None:
    """``/rewind``: pick an earlier message of yours, restore, continue in a fork;
    returns the message to send again (edited), if any."""
    session = repl.loop.run(repl.coordinator.get_session(repl.session_id))
    turns = [(n, m.text) for n, m in enumerate(session.messages) if m.role == "user"]
    if not turns:
        repl.err.print("[dim]no message of yours to go back to[/]")
        return None
    for number, (_, text) in enumerate(turns, 1):
        line = " ".join(strip_control(text).split())
        shown = line if len(line) <= _SHOWN else line[: _SHOWN - 1] + "…"
        repl.err.print(f"{number:>3}  {escape(shown)}")
    choice = repl.read_line("go back to just before which? (number, Enter to cancel) ").strip()
    if not choice.isdigit() or not 1 <= int(choice) <= len(turns):
        repl.err.print("[dim]rewind cancelled[/]")
        return None
    to, prompt = turns[int(choice) - 1]
    for key, label in MODES.items():
        repl.err.print(f"  {key}  {label}")
    mode = repl.read_line("restore what? [1] ").strip() or "1"
    if mode not in MODES:
        repl.err.print("[dim]rewind cancelled[/]")
        return None
    files, conversation = mode in ("1", "3"), mode in ("1", "2")
    with _branches() as branches:
        try:
            result = branches.rewind(repl.session_id, to=to, files=files, conversation=conversation)
        except RewindConflict as conflict:
            repl.err.print(f"[yellow]{escape(conflict.message)}[/]")
            answer = repl.read_line("restore them anyway (your changes to them are lost)? [y/N] ")
            overwrite = answer.strip().lower() in {"y", "yes"}
            result = branches.rewind(
                repl.session_id,
                to=to,
                files=files,
                conversation=conversation,
                on_conflict="overwrite" if overwrite else "keep",
            )
    _report(repl, result)
    if result.fork is None:
        return None
    parent = repl.session_id
    _switch(repl, result.fork.session_id)
    repl.console.print(
        f"[dim]now in {result.fork.session_id[:8]}; {parent[:8]} is kept as it was[/]"
    )
    return _offer(repl, prompt)


def _report(repl: ChatRepl, result: RewindResult) -> None:
    if result.files is None:
        return
    if not result.files.items:
        repl.console.print("[dim]no file to restore[/]")
    for item in result.files.items:
        why = f" ({escape(item.reason)})" if item.reason else ""
        style = "yellow" if item.reason else "dim"
        repl.console.print(f"[{style}]{item.action} {escape(item.path)}{why}[/]")


def _offer(repl: ChatRepl, prompt: str) -> str | None:
    """Put ``prompt`` back on the input line to edit (readline); the text to send."""
    repl.console.print("[dim]your message, to edit and send again (an empty line cancels):[/]")
    try:
        import readline
    except ImportError:  # pragma: no cover - readline is there on Linux
        readline = None  # type: ignore[assignment]
    if readline is not None:
        readline.set_startup_hook(lambda: readline.insert_text(prompt))
    else:  # pragma: no cover
        repl.console.print(prompt, markup=False)
    try:
        text = repl.read_line("› ").strip()
    except (EOFError, KeyboardInterrupt):
        text = ""
    finally:
        if readline is not None:
            readline.set_startup_hook(None)
    return text or None


class TurnFiles:
    """Which files one turn changed, for the dim ``changed: ...`` line after it: the
    session's checkpoint log is read from where it ended when the turn began (the
    tool calls append to it before the turn's answer comes back, in this process or
    in the service alike).

    Example::

        files = TurnFiles(settings, session_id)
        ...                                # the turn runs
        files.note()                       # "changed: a.py (+1 more)" or None
    """

    def __init__(self, settings: OllmSettings, session_id: str) -> None:
        self.log: ChangeLog | None = None
        self.since = 0
        if not settings.checkpoints.enabled:
            return
        try:
            checkpoints = WorkspaceCheckpoints.of_session(
                settings.snapshots.data_dir, session_id, settings.checkpoints
            )
        except ValueError:  # not a session id: nothing can have been kept for it
            return
        self.log = checkpoints.log
        self.since = self.log.size()

    def note(self) -> str | None:
        """``changed: ...`` for the paths changed since, or None when there are none."""
        if self.log is None:
            return None
        try:
            changes = self.log.read(self.since)
        except OSError:
            return None
        return changed_note(changes) if changes else None


def branch_command(repl: ChatRepl, name: str, args: list[str]) -> str | None:
    """Run ``/fork`` or ``/rewind`` (errors are shown, the chat goes on); returns a
    message to send (the rewound prompt, edited)."""
    try:
        if name == "/fork":
            fork_command(repl, args)
            return None
        return rewind_command(repl, args)
    except OllmError as error:
        repl.err.print(f"[red]error:[/] {escape(str(error))}")
        return None
