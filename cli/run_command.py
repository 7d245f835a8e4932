"""What ``ollm run`` does, whichever parser read its options.

Typer reads them for ``ollm run`` (:mod:`ollm_cli.cli.run_cmd`, with its ``--help``);
a warm ``ollm run -p`` reads them without typer, click or their help machinery
(:mod:`ollm_cli.cli.run_lean`): both hand the same :class:`RunOptions` to
:func:`run_command`, so the two cannot disagree on what a flag does. This module
imports no typer.

By default the conversation runs in the long-lived local OLLM service (started on
first use, see ``ollm service``): this command is then its thin client, sending the
message and rendering what comes back. ``--runtime ray`` builds a Ray pipeline for
this command alone (or uses the cluster at ``--ray-address``); ``--runtime
inprocess`` keeps every service in this process.

Example::

    run_command(RunOptions(prompt="Name three colors.", json_output=True))
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ollm_cli.cli import output
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.cli.one_shot import ApproveMode, one_turn, prompt_text, tool_grant
from ollm_cli.cli.output import stderr_is_plain
from ollm_cli.cli.overrides import ProviderChoice, RuntimeChoice, apply_overrides
from ollm_cli.cli.state import loaded_settings
from ollm_cli.cli.workspace_trust import settle_workspace_trust
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.contract import ConversationContract
from ollm_cli.pipeline.errors import OllmError, SessionNotFoundError, StorageError, UsageError
from ollm_cli.pipeline.events import EventBus
from ollm_cli.pipeline.records import CloseReport
from ollm_cli.pipeline.service import open_conversations
from ollm_cli.pipeline.tools import ToolGrant

if TYPE_CHECKING:
    from ollm_cli.cli.chat_repl import ChatRepl


@dataclass(frozen=True)
class RunOptions:
    """The options of one ``ollm run`` (each as ``ollm run --help`` describes it)."""

    prompt: str | None = None
    """``-p``: the message (``-`` for stdin), or ``None`` for the chat."""
    session: str | None = None
    """The argument: with ``--resume``, the session to resume."""
    resume: bool = False
    continue_latest: bool = False
    any_folder: bool = False
    model: str | None = None
    provider: ProviderChoice | None = None
    runtime: RuntimeChoice | None = None
    ray_address: str | None = None
    no_loop_detection: bool = False
    json_output: bool = False
    trust_workspace: bool = False
    truncate_prompt: bool = False
    allow_tools: str | None = None
    approve: ApproveMode | None = None


def run_command(options: RunOptions) -> None:
    """Run ``ollm run`` with ``options``: the chat, or the ``-p`` turn."""
    prompt = prompt_text(options.prompt, sys.stdin)  # refused here, before any service starts
    settle_workspace_trust(flag=options.trust_workspace, may_ask=prompt is None)
    settings = apply_overrides(
        loaded_settings().settings,
        model=options.model,
        provider=options.provider.value if options.provider else None,
        runtime=options.runtime.value if options.runtime else None,
        ray_address=options.ray_address,
        no_loop_detection=options.no_loop_detection,
    )
    _run(
        settings,
        Path.cwd(),
        prompt,
        options.session,
        options.resume,
        options.continue_latest,
        options.model,
        options.json_output,
        truncate_prompt=options.truncate_prompt,
        anywhere=options.any_folder,
        grant=tool_grant(options.allow_tools, options.approve, settings, Path.cwd()),
        approve=options.approve,
    )


def _run(
    settings: OllmSettings,
    workspace: Path,
    prompt: str | None,
    session: str | None,
    resume: bool,
    continue_latest: bool,
    model: str | None,
    json_output: bool,
    *,
    truncate_prompt: bool = False,
    anywhere: bool = False,
    grant: ToolGrant | None = None,
    approve: ApproveMode | None = None,
) -> None:
    """The chat or the ``-p`` turn, on any runtime, through the conversation contract:
    in the local service by default (this command is then its thin client), in
    this process with ``--runtime inprocess`` or ``ray``. ``grant``: the tools its
    turns run without asking; ``--approve deny`` asks nobody, even in the chat."""
    if session is not None and not resume:  # before any service starts for nothing
        raise UsageError(
            f"unexpected argument {session!r}",
            hint="to resume that session use `ollm run --resume ID`; to send a message use -p",
        )
    if session is not None:  # an id that cannot be one is said before the service starts
        from ollm_cli.pipeline.recording._ids import check_prefix

        check_prefix(session)
    loop = LoopThread()
    events = EventBus()
    interactive = prompt is None
    # the chat's and rich's imports: a -p turn in a pipe needs neither
    repl = _chat_repl(loop) if interactive else None
    lifecycle, conversations = open_conversations(
        settings,
        workspace,
        events=events,
        ask=repl.ask_approval
        if repl is not None and sys.stdin.isatty() and approve is not ApproveMode.deny
        else None,
        grant=grant,
        discard_failed=True,  # a first request that fails leaves no empty session
        announce_start=_announce_service_start,
    )
    if repl is not None:
        repl.coordinator = conversations
        repl.use_line_editor()
        repl.truncate_prompt = truncate_prompt
    started = False
    failed = False
    report: CloseReport | None = None
    try:
        with _spinner("starting the pipeline…"):
            loop.run(lifecycle.start())
        started = True
        session_id = _open_session(
            loop,
            conversations,
            repl.read_line if repl is not None else input,
            session,
            resume,
            continue_latest,
            model,
            anywhere,
        )
        _show_notices(loop, conversations)
        if repl is not None:
            events.subscribe(repl.render_event)
            repl.chat(session_id)
        else:
            assert prompt is not None
            one_turn(
                loop,
                conversations,
                events,
                session_id,
                prompt,
                json_output=json_output,
                truncate_prompt=truncate_prompt,
                approve=approve,
            )
    except BaseException:
        failed = True
        raise
    finally:
        try:
            if any(conversations.compression_pending(sid) for sid in conversations.conversations):
                from ollm_cli.cli.chat_repl import finish_compressions

                finish_compressions(loop, conversations, output.err_console)
            for sid in list(conversations.conversations):
                _quietly_if(failed, loop, conversations.end_session(sid))
        finally:
            try:
                if started:
                    report = _close_recording(loop, conversations)
                _quietly_if(failed, loop, lifecycle.shutdown())
            finally:
                loop.close()
        if report is not None and not report.ok and not failed:
            raise _not_saved_error(report, settings.services.session.data_dir)


def _chat_repl(loop: LoopThread) -> ChatRepl:
    from ollm_cli.cli.chat_repl import ChatRepl

    return ChatRepl(loop, output.console, output.err_console)


def _spinner(text: str) -> contextlib.AbstractContextManager[Any]:
    """A spinner only where it is seen: without a terminal rich's would draw nothing,
    and its import (rich.live, the spinners' table; rich itself in a pipe) would be
    the client's cost."""
    if stderr_is_plain():
        return contextlib.nullcontext()
    err_console = output.err_console
    return (
        err_console.status(text, spinner="dots")
        if err_console.is_terminal
        else contextlib.nullcontext()
    )


def _quietly_if(failed: bool, loop: LoopThread, step: Coroutine[Any, Any, None]) -> None:
    """Run a closing step; when the command already failed (the service died under
    it: exit code 8), a second error from closing does not hide the first."""
    if not failed:
        loop.run(step)
        return
    with contextlib.suppress(OllmError):
        loop.run(step)


def _announce_service_start() -> None:
    """Say that this command is starting the local service (it takes seconds)."""
    output.err_console.print(
        "[dim]starting the OLLM service (it stays for the next commands; "
        "`ollm service stop` stops it)…[/]"
    )


def _open_session(
    loop: LoopThread,
    coordinator: ConversationContract,
    read_line: Callable[[str], str],
    session: str | None,
    resume: bool,
    continue_latest: bool,
    model: str | None,
    anywhere: bool = False,
) -> str:
    """The session of this command: new, ``--resume [ID]`` or ``--continue``; a
    ``--model`` given is the model of its turns, resumed or not."""
    if continue_latest:
        return _continue_latest(loop, coordinator, model, anywhere=anywhere)
    if resume and session is None:
        from ollm_cli.cli.session_picker import pick_session  # a chat's, never -p's cost

        session = pick_session(loop, coordinator, output.err_console, read_line)
    return loop.run(coordinator.start_session(resume=session, model=model))


def _continue_latest(
    loop: LoopThread, coordinator: ConversationContract, model: str | None, *, anywhere: bool
) -> str:
    """``--continue``: the latest session with messages of this folder (``--any``: of
    any folder), named on stderr."""
    recent = loop.run(coordinator.recent_sessions(1, this_folder=not anywhere, with_messages=True))
    if not recent:
        where = "" if anywhere else " in this folder"
        raise SessionNotFoundError(
            f"there is no session to continue{where}",
            hint="start one with `ollm run`"
            + ("" if anywhere else ", or continue the latest of any folder with --continue --any"),
        )
    from rich.markup import escape

    from ollm_cli.cli.session_picker import imported_notice, one_line

    latest = recent[0]
    title = f" {escape(one_line(latest.title or ''))}" if latest.title else ""
    when = latest.last_activity[:16].replace("T", " ")
    output.err_console.print(
        f"[dim]continuing {latest.session_id[:8]}{title} ({when}, "
        f"{latest.message_count} messages)[/]"
    )
    notice = imported_notice(latest.session_id, latest.tags)
    if notice is not None:
        output.err_console.print(notice)
    return loop.run(coordinator.start_session(resume=latest.session_id, model=model))


def _show_notices(loop: LoopThread, coordinator: ConversationContract) -> None:
    """Say once what the store did on its own (sessions trashed, records replayed)."""
    for notice in loop.run(coordinator.take_notices()):
        from rich.markup import escape

        output.err_console.print(f"[yellow]{escape(notice)}[/]")


def _close_recording(loop: LoopThread, coordinator: ConversationContract) -> CloseReport | None:
    """Close the session store; say what it could not write and where it was rescued."""
    try:
        report = loop.run(coordinator.close_recording())
    except OllmError as error:
        from rich.markup import escape

        output.err_console.print(f"[red]closing the session store failed:[/] {escape(str(error))}")
        return None
    if not report.ok:
        from rich.markup import escape

        where = (
            f"kept in the rescue file {report.rescue_file}"
            if report.rescue_file
            else "LOST: no other folder was writable to rescue them to"
        )
        output.err_console.print(
            f"[red]⚠ {report.unsaved_records} record(s) could not be saved "
            f"({escape(report.error or 'write failed')}); {escape(where)}[/]"
        )
    return report


def _not_saved_error(report: CloseReport, data_dir: Path) -> StorageError:
    sessions = ", ".join(sid[:8] for sid in report.sessions) or "?"
    if report.rescue_file:
        rest = (
            f"They were written to the rescue file {report.rescue_file}; the next ollm "
            "command that can write there replays them."
        )
    else:
        rest = "No other filesystem was writable, so they are lost."
    return StorageError(
        f"the turn was not saved: {report.unsaved_records} record(s) of session {sessions} "
        f"could not be written to {data_dir} ({report.error or 'write failed'}). {rest}",
        hint="free some disk space (or fix the folder's permissions), then run "
        "`ollm sessions doctor --fix` or any chat to bring them in",
    )
