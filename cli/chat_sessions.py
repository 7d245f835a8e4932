"""The chat's ``/sessions``, ``/resume [ID]`` and ``/model [NAME]``, and the replay of
the last turns when a session is resumed.

- ``/sessions``: the recent sessions with messages, one line each, fitted to the
  terminal's width (titles cut with "…").
- ``/resume ID`` switches to that session; ``/resume`` alone opens the picker
  (:mod:`ollm_cli.cli.session_picker`). Either way the last turns are shown.
- ``/model NAME`` sends the next turns to NAME (recorded in the session's
  ``metadata.modeHistory``); ``/model`` shows the current model and those the
  provider has, as ``ollm models`` lists them.

Everything shown that was recorded (titles, messages) has its control sequences
stripped by the consoles and is printed without markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from ollm_cli.cli.session_picker import Choice, fit, pick_session
from ollm_cli.pipeline.records import Session, SessionMessage
from ollm_cli.pipeline.terminal_text import strip_control

if TYPE_CHECKING:
    from ollm_cli.cli.chat_repl import ChatRepl

REPLAYED_EXCHANGES = 3
"""How many of the last exchanges (a message of yours and what answered it) a resume shows."""
REPLAY_LINES = 6
REPLAY_CHARS = 600
LISTED = 10


def _cut(message: SessionMessage, *, keep_end: bool) -> str:
    """The message's text within :data:`REPLAY_LINES` lines and :data:`REPLAY_CHARS`
    characters, saying how much is left out (the end kept for an interrupted answer)."""
    text = strip_control(message.text).strip()
    lines = text.splitlines()
    if len(lines) <= REPLAY_LINES and len(text) <= REPLAY_CHARS:
        return text
    if keep_end:
        kept = "\n".join(lines[-REPLAY_LINES:])[-REPLAY_CHARS:]
        return f"… ({len(text) - len(kept)} characters before)\n{kept}"
    kept = "\n".join(lines[:REPLAY_LINES])[:REPLAY_CHARS]
    return f"{kept}\n… ({len(text) - len(kept)} more characters: /history shows them)"


def replay_last_turns(console: Console, session: Session) -> None:
    """Show the session's last exchanges before the prompt, dimmed, each message cut
    to a few lines; an answer cut short (Ctrl-C, a crash) says so."""
    shown = [m for m in session.messages if m.role in {"user", "assistant"} and m.text.strip()]
    users = [i for i, m in enumerate(shown) if m.role == "user"]
    if not shown:
        return
    start = users[-REPLAYED_EXCHANGES] if len(users) >= REPLAYED_EXCHANGES else 0
    earlier = sum(1 for m in shown[:start] if m.role == "user")
    console.print(
        f"[dim]── the last {len(users) - earlier} exchange(s) of {len(users)} "
        "(/history shows all) ──[/]"
    )
    for message in shown[start:]:
        interrupted = (message.model_extra or {}).get("interrupted") is True
        label = "[bold]›[/] " if message.role == "user" else ""
        console.print(label, end="")
        console.print(_cut(message, keep_end=interrupted), markup=False, highlight=False)
        if interrupted:
            console.print("[yellow](the last answer was interrupted: this is what it had shown)[/]")
    console.print("[dim]──[/]")


def sessions_command(repl: ChatRepl) -> None:
    """``/sessions``: the recent sessions with messages, one line each."""
    recent = repl.loop.run(repl.coordinator.recent_sessions(LISTED, with_messages=True))
    width = repl.console.width
    for summary in recent:
        mark = "*" if summary.session_id == repl.session_id else " "
        line = Choice.of(summary).line(width - 2)
        repl.console.print(f"{mark} {line}", markup=False, highlight=False, soft_wrap=True)
    if not recent:
        repl.console.print("[dim]no sessions with messages yet[/]")


def resume_command(repl: ChatRepl, args: list[str]) -> None:
    """``/resume [ID]``: leave this session and go on with another (the picker without ID)."""
    from ollm_cli.cli.chat_repl import finish_compressions

    target = args[0] if args else None
    if target is None:
        try:
            target = pick_session(repl.loop, repl.coordinator, repl.err, repl.read_line)
        except KeyboardInterrupt:  # Ctrl-C in the picker: back to this session
            target = None
        if target is None:
            repl.console.print("[dim]staying in this session[/]")
            return
    finish_compressions(repl.loop, repl.coordinator, repl.err)
    repl.loop.run(repl.coordinator.end_session(repl.session_id))
    repl.session_id = repl.loop.run(repl.coordinator.start_session(resume=target))
    repl.console.print(f"[dim]resumed {repl.session_id[:8]}[/]")
    replay_last_turns(repl.console, repl.loop.run(repl.coordinator.get_session(repl.session_id)))


def model_command(repl: ChatRepl, args: list[str]) -> None:
    """``/model NAME`` switches the model of the next turns; ``/model`` lists them."""
    current = repl.coordinator.conversations[repl.session_id].model
    if args:
        repl.loop.run(repl.coordinator.switch_model(repl.session_id, args[0]))
        repl.console.print(
            f"[dim]model: {escape(current)} → {escape(args[0])} (from the next message; "
            "recorded in the session)[/]"
        )
        return
    names = repl.loop.run(repl.coordinator.provider_models())
    repl.console.print(f"model: [bold]{escape(current)}[/]")
    width = repl.console.width
    for name in names:
        mark = "  (current)" if name == current else ""
        repl.console.print(f"  {escape(fit(name, width - 14))}{mark}", highlight=False)
    if not names:
        repl.console.print("[dim]the provider lists no model[/]")
    else:
        repl.console.print("[dim]/model NAME switches to one of them[/]")
