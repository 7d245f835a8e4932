"""``ollm run -p``: one turn for a script, a pipe or a terminal.

The message comes from the command line, from stdin, or both:

- ``-p TEXT`` sends ``TEXT``; with stdin piped (a pipe or a redirected file) it
  sends ``TEXT``, a blank line, then what was piped (as ``llm`` and Claude Code do):
  ``git diff | ollm run -p "Review this:"``;
- ``-p -`` sends stdin as it is, byte for byte, of any size: ``ollm run -p - < big.txt``;
- without ``-p`` the chat needs a terminal: with stdin piped it is refused at once
  (exit code 2) with the hint to use ``-p -``, rather than every line becoming a turn.

An empty or blank message, and stdin that is not UTF-8, are refused (exit code 2)
before any service starts or anything is recorded.

When stdout is a terminal the answer is written as it streams; in a pipe it is
written once, and stdout carries only the answer: every notice goes to stderr.

Tools: ``-p`` asks nobody, so a tool whose approval is ``ask`` is not run unless
``--allow-tools NAME,...`` names it or ``--approve auto`` allows every one (a
config's ``deny`` stays); each call not run is said in one line on stderr that
names the flag that lets it run.

Example::

    text = prompt_text("-", sys.stdin)          # what ``-p -`` sends
    grant = tool_grant("shell,write_file", None, settings, Path.cwd())
"""

from __future__ import annotations

import enum
import io
import os
import stat
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ollm_cli.cli.output import print_json, stderr_is_plain, write_stderr_line, write_stdout
from ollm_cli.cli.oversized_prompt import run_turn_within_window
from ollm_cli.pipeline.coordinator._turn_result import raise_if_stopped
from ollm_cli.pipeline.errors import UsageError
from ollm_cli.pipeline.events import (
    ContextNotice,
    EventBus,
    LoopDetectedEvent,
    PipelineEvent,
    TextDelta,
    ToolCallEvent,
)
from ollm_cli.pipeline.tools import ToolGrant

if TYPE_CHECKING:
    from ollm_cli.cli.loop_thread import LoopThread
    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.contract import ConversationContract

STDIN = "-"
"""``-p -``: the message is stdin."""


class ApproveMode(enum.StrEnum):
    """``--approve``: what a tool whose approval is ``ask`` does when nobody asks."""

    auto = "auto"
    deny = "deny"


# ------------------------------------------------------------------ the message


def prompt_text(option: str | None, stdin: IO[str] | None) -> str | None:
    """The message ``-p`` sends (``None``: the chat), or a :class:`UsageError`.

    Read before any service starts: a chat with stdin piped, an empty message and
    stdin that is not UTF-8 are refused before anything is recorded."""
    if option is None:
        if stdin is None or not stdin.isatty():
            raise UsageError(
                "the chat needs a terminal, and stdin is not one",
                hint="to send what is piped in use `ollm run -p -`, or `ollm run -p TEXT` "
                "to send TEXT followed by it",
            )
        return None
    if option == STDIN:
        text = _read(stdin)
        if not text.strip():
            raise UsageError(
                "the message is empty: stdin had nothing to send (-p -)",
                hint="pipe the message in (`echo 'Hello' | ollm run -p -`), or give it "
                "as `-p TEXT`",
            )
        return text
    if not option.strip():
        raise UsageError(
            "the message is empty (-p with blank text)",
            hint="give the message after -p (`ollm run -p 'Hello'`), or `-p -` to send stdin",
        )
    piped = _read(stdin) if stdin is not None and _is_piped(stdin) else ""
    return f"{option}\n\n{piped}" if piped.strip() else option


def _is_piped(stream: IO[str]) -> bool:
    """Whether ``stream`` is a pipe or a redirected file (to read to its end), not a
    terminal, ``/dev/null`` or a socket a supervisor left open."""
    if stream.isatty():
        return False
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, io.UnsupportedOperation):
        return True  # an in-memory stream: what a test or an embedding program gives
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _read(stdin: IO[str] | None) -> str:
    """All of stdin, decoded as UTF-8 (strictly: a wrong byte is an error, not a ``?``)."""
    if stdin is None:
        return ""
    binary = getattr(stdin, "buffer", None)
    data: bytes | str = binary.read() if binary is not None else stdin.read()
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"stdin is not UTF-8 text: the byte 0x{data[error.start]:02x} at offset "
            f"{error.start} is not valid UTF-8",
            hint="convert it first, e.g. `iconv -f latin1 -t utf-8 FILE | ollm run -p -`",
        ) from None


# ------------------------------------------------------------------ the tools


def tool_grant(
    allow_tools: str | None,
    approve: ApproveMode | None,
    settings: OllmSettings,
    workspace: Path,
) -> ToolGrant | None:
    """What ``--allow-tools`` and ``--approve auto`` allow (``None``: nothing beyond
    the config); a name no tool has, or a tool the config denies, is a
    :class:`UsageError` naming the tools there are."""
    names = [n.strip() for n in (allow_tools or "").split(",") if n.strip()]
    if allow_tools is not None and not names:
        raise UsageError(
            "--allow-tools names no tool",
            hint="give tool names separated by commas, e.g. --allow-tools shell,write_file",
        )
    if names:
        known = _tool_names(workspace)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(
                f"--allow-tools names no tool called {', '.join(map(repr, unknown))}",
                hint=f"the tools are {', '.join(known)}",
            )
        approval = settings.tools
        denied = [n for n in names if approval.approval.get(n, approval.default_approval) == "deny"]
        if denied:
            keys = ", ".join(f"tools.approval.{n}: deny" for n in denied)
            raise UsageError(
                f"--allow-tools cannot allow what the config denies ({keys})",
                hint="change it in the config (`ollm config show` says which file sets it)",
            )
    if not names and approve is not ApproveMode.auto:
        return None
    return ToolGrant(tools=frozenset(names), every_tool=approve is ApproveMode.auto)


def _tool_names(workspace: Path) -> list[str]:
    """The tools a conversation in ``workspace`` has: the built-in ones and the
    extensions' (loaded as the tool workers load them)."""
    from ollm_cli.pipeline.extensions import load_extensions
    from ollm_cli.pipeline.tools._registry import builtin_tools

    names = {tool.name for tool in builtin_tools()}
    names.update(str(tool.name) for tool in load_extensions(workspace=workspace).tools)
    return sorted(names)


class DeniedCalls:
    """The tool calls of a turn that were not run, said in one line each (a tool once)."""

    def __init__(self, approve: ApproveMode | None) -> None:
        self.approve = approve
        self.lines: list[str] = []
        self._said: set[str] = set()

    def __call__(self, event: PipelineEvent) -> None:
        if not isinstance(event, ToolCallEvent) or event.denied is None:
            return
        if event.name in self._said:
            return
        self._said.add(event.name)
        self.lines.append(self.line(event.name, event.denied))

    def line(self, tool: str, denied: str) -> str:
        """Why ``tool`` did not run, and the flag (or key) that lets it."""
        if denied == "deny":
            return (
                f"the model called {tool}, which was not run: the config denies it "
                f"(tools.approval.{tool}: deny)"
            )
        why = "--approve deny" if self.approve is ApproveMode.deny else "-p asks nobody"
        return (
            f"the model called {tool}, which was not run ({why}); "
            f"--allow-tools {tool} or --approve auto lets it run"
        )


# ------------------------------------------------------------------ the turn


class AnswerStream:
    """The answer's text written to stdout as it comes (stdout is a terminal)."""

    def __init__(self) -> None:
        self.written = False
        self.ends_line = True

    def __call__(self, event: PipelineEvent) -> None:
        if isinstance(event, TextDelta) and event.text:
            write_stdout(event.text)
            self.written = True
            self.ends_line = event.text.endswith("\n")

    def end_line(self) -> None:
        """Close the answer's last line (before an error, a notice or the prompt)."""
        if self.written and not self.ends_line:
            write_stdout("\n")
            self.ends_line = True


def one_turn(
    loop: LoopThread,
    coordinator: ConversationContract,
    events: EventBus,
    session_id: str,
    prompt: str,
    *,
    json_output: bool,
    truncate_prompt: bool = False,
    approve: ApproveMode | None = None,
) -> None:
    """Run the ``-p`` turn: the answer to stdout (streamed on a terminal, whole in
    a pipe, or the result as JSON), everything else on stderr."""
    events.subscribe(_warn_on_loop, {"loop:detected"})
    events.subscribe(_warn_on_notice, {"context:notice"})
    denied = DeniedCalls(approve)
    events.subscribe(denied, {"tool:call"})
    stream = AnswerStream() if not json_output and _stdout_is_terminal() else None
    if stream is not None:
        events.subscribe(stream, {"model:text"})
    try:
        result = run_turn_within_window(
            loop, coordinator, session_id, prompt, truncate=truncate_prompt
        )
    finally:
        if stream is not None:
            stream.end_line()
    result.notices.extend(denied.lines)
    for notice in result.notices:  # what was cut, left out or not run: said, never silent
        _say(f"⚠ {notice}", "yellow")
    if json_output:
        print_json(result)
    else:
        if stream is None or not stream.written:
            write_stdout(result.answer.rstrip("\n") + "\n")
        _say(f"session {session_id[:8]}", "dim")
    raise_if_stopped(result)


def _say(line: str, style: str) -> None:
    """One line on stderr: styled on a terminal (rich), plain in a pipe or a file, as
    rich writes it there (without importing rich), never wrapped."""
    if stderr_is_plain():
        write_stderr_line(line)
        return
    from ollm_cli.cli.output import err_console

    err_console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)


def _stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def _warn_on_loop(event: PipelineEvent) -> None:
    if isinstance(event, LoopDetectedEvent):
        from rich.markup import escape

        from ollm_cli.cli.output import err_console

        err_console.print(
            f"[yellow]loop detected ({escape(event.pattern)}, {event.count}×): "
            f"{escape(event.details)} → {event.action}[/]"
        )


def _warn_on_notice(event: PipelineEvent) -> None:
    if isinstance(event, ContextNotice):
        from rich.markup import escape

        from ollm_cli.cli.output import err_console

        err_console.print(f"[yellow]{escape(event.message)}[/]")


__all__ = [
    "ApproveMode",
    "one_turn",
    "prompt_text",
    "tool_grant",
]
