"""The interactive chat of ``ollm run``: input, streamed output, slash commands.

Input is read on the main thread; each turn runs on the pipeline's loop
thread. Ctrl-C during a turn cancels it (what was recorded stays recorded);
Ctrl-C at the prompt only clears the line; Ctrl-D or ``/exit`` ends the
session.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ollm_cli.cli.chat_render import StreamWriter, tool_call_lines
from ollm_cli.cli.loop_thread import LoopThread, ctrl_c_interrupts
from ollm_cli.cli.oversized_prompt import run_turn_within_window
from ollm_cli.pipeline.contract import ConversationContract
from ollm_cli.pipeline.errors import OllmError, ServiceLostError
from ollm_cli.pipeline.events import (
    CompressionFinished,
    CompressionStarted,
    ContextNotice,
    LoopDetectedEvent,
    PipelineEvent,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:
    from ollm_cli.cli.chat_branches import TurnFiles

HELP = """\
/help                          this list
/exit                          end the session (Ctrl-D too)
/sessions                      recent sessions
/resume [ID]                   switch to another session (the picker without ID)
/model [NAME]                  switch the model of the next turns (alone: list them)
/title TEXT                    set this session's title
/context add KEY TEXT          add context to the system prompt (also: list, remove KEY)
/history                       the whole recorded history of this session
/compress [focus]              compress the active context now
/snapshot                      save a snapshot of the active context
/thinking on|off               show a reasoning model's reasoning (dimmed), or fold it
/fork [N]                      continue in a fork holding the first N messages (default all)
/rewind                        go back to an earlier message of yours, with the files
"""


def slash_commands() -> list[str]:
    """The slash commands the chat knows, as :data:`HELP` lists them (for completion)."""
    listed = [line.split()[0] for line in HELP.splitlines() if line.startswith("/")]
    return [*listed, "/quit"]


def compression_line(event: CompressionFinished) -> str:
    """The status line of a finished compression: tokens before and after, and
    whether the summary failed and truncation took its place."""
    change = f"{event.tokens_before} → {event.tokens_after} tokens"
    if event.error:
        return f"[yellow]compression failed ({escape(event.error)}); {change}[/]"
    if event.fallback:
        return (
            f"[yellow]compression fell back to {escape(event.strategy)}: "
            f"{escape(event.fallback)}; {change}[/]"
        )
    return f"[dim]compressed ({escape(event.strategy)}): {change}[/]"


def finish_compressions(loop: LoopThread, coordinator: ConversationContract, err: Console) -> None:
    """At exit: wait for each compression still running (up to
    ``services.compression.finishOnExitS``) behind a spinner that says what it
    does, so that it is recorded; Ctrl-C skips it."""
    for session_id in list(coordinator.conversations):
        pending = coordinator.compression_pending(session_id)
        if pending is None:
            continue
        try:
            with err.status(f"{pending}; Ctrl-C skips it", spinner="dots"):
                loop.run(coordinator.finish_compression(session_id))
        except KeyboardInterrupt:
            loop.run(coordinator.skip_compression(session_id))
            err.print("[yellow]compression skipped; the next resume compresses again[/]")


_SHOWN_EVENTS = (
    ToolCallEvent,
    LoopDetectedEvent,
    CompressionStarted,
    CompressionFinished,
    ContextNotice,
)
"""The events :meth:`ChatRepl.render_event` prints on lines of their own (the
answer's text ends before them; the end of the turn renders the final answer)."""


class ChatRepl:
    """Reads lines, runs turns, renders events."""

    def __init__(
        self,
        loop: LoopThread,
        console: Console,
        err_console: Console,
        read_line: Callable[[str], str] = input,
        ask_line: Callable[[str], str] | None = None,
    ) -> None:
        self.loop = loop
        self.console = console
        self.err = err_console
        self.read_line = read_line
        """Reads the chat's messages (prompt_toolkit's editor on a terminal)."""
        self.ask_line = ask_line or read_line
        """Reads an answer to a question asked during a turn, from the loop's thread."""
        self.coordinator: ConversationContract
        self.session_id = ""
        self.stream = StreamWriter(console, watched=[err_console])
        self._always_allowed: set[tuple[str, str]] = set()  # (session id, tool name)
        self.show_thinking = False
        self.truncate_prompt = False
        """A message larger than the window is sent cut (``--truncate-prompt``), not refused."""
        """Reasoning is shown dimmed when on; folded to one line when off (``/thinking``)."""
        self._thinking = False
        self._unsaved = False

    def use_line_editor(self) -> None:
        """Read with prompt_toolkit's line editor when stdin and stdout are terminals
        (history in ``OLLM_HOME``, completion of slash commands and session ids)."""
        from ollm_cli.cli.line_editor import terminal_line_editor
        from ollm_cli.config.paths import ollm_home

        editor = terminal_line_editor(ollm_home(), slash_commands(), self._recent_ids)
        if editor is not None:
            self.read_line = editor.read
            self.ask_line = editor.ask

    def _recent_ids(self) -> list[str]:
        try:
            return [str(s.session_id) for s in self.loop.run(self.coordinator.recent_sessions(50))]
        except OllmError:
            return []

    def _say_how_to_resume(self) -> None:
        """On leaving: the command that comes back to this session, once it has any."""
        try:
            messages = self.loop.run(self.coordinator.get_session(self.session_id)).messages
        except OllmError:
            return
        if messages:
            resume = f"ollm run --resume {self.session_id[:8]}"
            self.err.print(f"[dim]resume this session with: {resume}[/]")

    def _lost_service(self, error: ServiceLostError) -> ServiceLostError:
        """The service died under the chat: no later message could be answered, so the
        chat ends (exit 8, said by ``main``) with the command that resumes this session
        on the service the next command starts."""
        self.stream.abandon()
        self.console.print()
        return ServiceLostError(
            str(error),
            hint="everything acknowledged before this point is saved; resume this session "
            f"with: ollm run --resume {self.session_id[:8]} (it starts a new service); "
            "see `ollm service logs`",
        )

    # ----------------------------------------------------------------- rendering

    def render_event(self, event: PipelineEvent) -> None:
        """Show one pipeline event to the user."""
        if isinstance(event, ThinkingDelta):
            self._render_thinking(event.text)
            return
        if self._thinking and not isinstance(event, StatusEvent):
            self.console.print()
            self._thinking = False
        if isinstance(event, TextDelta):
            self.stream.write(event.text)
            return
        if isinstance(event, _SHOWN_EVENTS):  # a line of its own, under the text so far
            self.stream.finish()
        if isinstance(event, ToolCallEvent):
            for line in tool_call_lines(event):
                self.console.print(line)
        elif isinstance(event, LoopDetectedEvent):
            verb = "nudging the model" if event.action == "nudge" else "stopping"
            self.console.print(
                f"[yellow]⚠ loop detected: {escape(event.pattern)} ×{event.count} "
                f"({escape(event.details)}); {verb}[/]"
            )
        elif isinstance(event, CompressionStarted):
            self.console.print(
                f"[dim]compressing {event.tokens} tokens ({escape(event.strategy)}) "
                "in the background…[/]"
            )
        elif isinstance(event, CompressionFinished):
            self.console.print(compression_line(event))
        elif isinstance(event, ContextNotice):
            self.console.print(f"[yellow]⚠ {escape(event.message)}[/]")
        elif isinstance(event, StatusEvent) and event.activity == "idle" and event.context_window:
            self.stream.finish(markdown=True)  # the turn's final answer, before its figures
            share = 100 * event.tokens_used / event.context_window
            self.console.print(
                f"[dim]{event.tokens_used}/{event.context_window} tokens ({share:.0f}%)[/]"
            )

    def _render_thinking(self, text: str) -> None:
        """Reasoning, dimmed: in full with ``/thinking on``, else one folded line."""
        if self.show_thinking:
            self.console.print(text, end="", style="dim italic", markup=False, highlight=False)
        elif not self._thinking:
            self.console.print("[dim]▸ thinking… (/thinking on shows it)[/]", end="")
        self._thinking = True

    # ----------------------------------------------------------------- prompts

    async def ask_approval(self, call: ToolCallPart) -> bool:
        """Ask whether the model may run ``call`` (policy ``ask``): yes, no, or always
        (this tool, without asking again, for the rest of this session)."""
        import asyncio

        if (self.session_id, call.name) in self._always_allowed:
            return True
        self.stream.finish()
        args = strip_control(", ".join(f"{k}={v!r}" for k, v in call.args.items()))
        question = f"\nallow {strip_control(call.name)}({args[:300]})? [y]es / [n]o / [a]lways "
        loop = asyncio.get_running_loop()
        try:
            answer = await loop.run_in_executor(None, self.ask_line, question)
        except EOFError:
            return False
        answer = answer.strip().lower()
        if answer in {"a", "always"}:
            self._always_allowed.add((self.session_id, call.name))
            self.err.print(
                f"[dim]{escape(call.name)} is allowed without asking for the rest of this "
                "session[/]"
            )
            return True
        return answer in {"y", "yes"}

    # -------------------------------------------------------------------- chat

    def chat(self, session_id: str) -> None:
        """The read–answer loop, until Ctrl-D or /exit. Ctrl-C cancels a turn even when
        this process was started with SIGINT ignored (see :func:`ctrl_c_interrupts`)."""
        with ctrl_c_interrupts():
            self._chat(session_id)

    def _chat(self, session_id: str) -> None:
        self.session_id = session_id
        self.err.print(
            f"[dim]session {session_id[:8]} · {escape(self._model())} · "
            "/help for commands, Ctrl-D to leave[/]"
        )
        self._show_interrupted()
        while True:
            self._check_saved()
            try:
                line = self.read_line("› ")
            except EOFError:
                self.console.print()
                self._say_how_to_resume()
                return
            except KeyboardInterrupt:
                self.console.print("\n[dim](Ctrl-D or /exit to leave)[/]")
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self._command(line):
                    self._say_how_to_resume()
                    return
                continue
            self._turn(line)

    def _show_interrupted(self) -> None:
        """On resume: the last turns, and whether the last answer was cut short."""
        from ollm_cli.cli.chat_sessions import replay_last_turns

        # the recorded session, which a coordinator of the service answers for too
        replay_last_turns(
            self.console, self.loop.run(self.coordinator.get_session(self.session_id))
        )

    def _check_saved(self) -> None:
        """A warning that stays, before every prompt, while records are not durable
        (the disk refused them; the journal keeps retrying), and one line when they
        are written again. A session file that only lags behind its journal is safe."""
        try:
            health = self.loop.run(self.coordinator.store_health())
        except OllmError:
            return
        if health.pending_writes:
            self._unsaved = True
            self.err.print(
                f"[bold red]⚠ NOT SAVED: {health.pending_writes} record(s) could not be written "
                f"({escape(health.last_error or 'write failed')}); retrying. Free some space: "
                "what is still unsaved when you leave goes to a rescue file.[/]"
            )
        elif self._unsaved:
            self._unsaved = False
            self.err.print("[green]✓ saved again: every record is on disk[/]")

    def _model(self) -> str:
        conversation = self.coordinator.conversations.get(self.session_id)
        return conversation.model if conversation else "?"

    def _turn(self, text: str) -> None:
        from ollm_cli.cli.chat_branches import TurnFiles  # as /fork and /rewind: when used

        files = TurnFiles(self.coordinator.settings, self.session_id)
        try:
            result = run_turn_within_window(
                self.loop, self.coordinator, self.session_id, text, truncate=self.truncate_prompt
            )
        except KeyboardInterrupt:
            self.stream.abandon()
            self.console.print(
                "\n[yellow]interrupted: the part of the answer shown is recorded, "
                "marked as interrupted[/]"
            )
            self._show_changed(files)
            return
        except ServiceLostError as error:
            raise self._lost_service(error) from None
        except OllmError as error:
            self.err.print(f"[red]error:[/] {escape(str(error))}")
            return
        self.stream.finish(markdown=True)
        self._show_changed(files)
        for notice in result.notices:  # what was left out of, or cut in, this turn
            self.err.print(f"[yellow]⚠ {escape(notice)}[/]")
        if result.stopped in {"loop", "limit"} and result.loop is not None:
            self.console.print(
                f"[yellow]stopped: {escape(result.loop.kind)} — {escape(result.loop.details)}[/]"
            )

    def _show_changed(self, files: TurnFiles) -> None:
        """The dim line saying which files the turn's tools changed (kept for /rewind)."""
        note = files.note()
        if note:
            self.console.print(f"[dim]{escape(strip_control(note))}[/]")

    def _command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        try:
            words = shlex.split(line)
        except ValueError as error:
            self.err.print(f"[red]cannot parse the command:[/] {escape(str(error))}")
            return True
        name, args = words[0], words[1:]
        try:
            if name in {"/exit", "/quit"}:
                return False
            if name == "/help":
                self.console.print(HELP, markup=False)
            elif name in {"/sessions", "/resume", "/model"}:
                from ollm_cli.cli.chat_sessions import (
                    model_command,
                    resume_command,
                    sessions_command,
                )

                if name == "/sessions":
                    sessions_command(self)
                elif name == "/resume":
                    resume_command(self, args)
                else:
                    model_command(self, args)
            elif name == "/title" and args:
                self.loop.run(self.coordinator.set_title(self.session_id, " ".join(args)))
                self.console.print("[dim]title set[/]")
            elif name == "/context":
                self._context(args)
            elif name == "/history":
                session = self.loop.run(self.coordinator.get_session(self.session_id))
                for message in session.messages:
                    cut = (message.model_extra or {}).get("interrupted") is True
                    self.console.print(
                        f"[bold]{message.role}[/] [dim]{message.timestamp}[/]"
                        + (" [yellow](interrupted)[/]" if cut else "")
                    )
                    self.console.print(message.text or "[dim](tool call)[/]", markup=False)
            elif name == "/compress":
                focus = " ".join(args) or None
                if focus:
                    self.console.print(f"[dim]compressing with the focus: {escape(focus)}[/]")
                result = self.loop.run(self.coordinator.compress_now(self.session_id, focus))
                if result is None:
                    self.console.print("[dim]nothing to compress[/]")
            elif name == "/thinking" and args[:1] in (["on"], ["off"]):
                self.show_thinking = args[0] == "on"
                self.console.print(
                    f"[dim]reasoning {'shown' if self.show_thinking else 'folded'}[/]"
                )
            elif name == "/snapshot":
                info = self.loop.run(self.coordinator.snapshot_now(self.session_id))
                self.console.print(f"[dim]snapshot {escape(info.id)} saved[/]")
            elif name in {"/fork", "/rewind"}:
                from ollm_cli.cli.chat_branches import branch_command

                again = branch_command(self, name, args)
                if again:
                    self._turn(again)
            else:
                self.err.print(f"[red]unknown or incomplete command[/] {escape(name)}; try /help")
        except ServiceLostError as error:
            raise self._lost_service(error) from None
        except OllmError as error:
            self.err.print(f"[red]error:[/] {escape(str(error))}")
        return True

    def _context(self, args: list[str]) -> None:
        context = self.coordinator.context
        if not args or args[0] == "list":
            entries = self.loop.run(context.entries(self.session_id))
            for entry in entries:
                self.console.print(
                    f"{escape(entry.key)} [dim]({entry.source}, priority {entry.priority})[/] "
                    f"{escape(entry.content[:80])}"
                )
            if not entries:
                self.console.print("[dim]no context entries[/]")
        elif args[0] == "add" and len(args) >= 3:
            self.loop.run(context.add(self.session_id, args[1], " ".join(args[2:])))
            self.console.print(f"[dim]added {escape(args[1])}[/]")
        elif args[0] == "remove" and len(args) == 2:
            self.loop.run(context.remove(self.session_id, args[1]))
            self.console.print(f"[dim]removed {escape(args[1])}[/]")
        else:
            self.err.print("usage: /context add KEY TEXT | list | remove KEY")
        sys.stdout.flush()
