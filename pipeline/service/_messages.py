"""The messages of a conversation's life on the local service's socket: the
hello, opening a session, a turn and what it streams back (its events, a tool
approval's question and answer, how it ended, its cancel), ending the session, the
store's notices, and a failure. One pydantic model per message.

That is all a warm ``ollm run -p`` sends and receives, so it is all such a command
builds: the other messages (the chat's slash commands, a load run's, the status
question) and the unions the service validates every frame with live in
:mod:`ollm_cli.pipeline.service._protocol`, which a client imports only when one of
them is sent or arrives.

Example::

    body = RunTurn(session_id="3f1c2a9e", text="Hello")
    CONVERSATION_REPLIES["turn_ended"]         # TurnEnded
"""

# No `from __future__ import annotations` here: pydantic evaluates a string annotation
# when it creates the class, a quarter of the time it takes to create these models,
# which every command does (a warm `ollm run -p` among them).
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ollm_cli.pipeline.coordinator._turn_result import TurnResult
from ollm_cli.pipeline.errors import (
    ActorFailedError,
    ConfigError,
    InvalidContextError,
    LoopDetectedError,
    OllmError,
    PromptTooLargeError,
    ProviderError,
    ServiceError,
    ServiceLostError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
    StorageError,
    ToolError,
    UsageError,
)
from ollm_cli.pipeline.events import AnyEvent
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.tools import ToolGrant


class Message(BaseModel):
    # built when first used: a client builds only the messages it sends and receives
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Hello(Message):
    """The first frame of a connection: who asks, for which configuration and folder."""

    type: Literal["hello"] = "hello"
    version: str
    pid: int
    started: float | None
    settings: dict[str, Any]
    """The client's settings: each section that differs from its default, as a
    config file writes it (``OllmSettings.changed_sections()``); the service
    validates them whole (a client builds the validators of those sections alone)."""
    workspace: str
    environment: dict[str, str]


class OpenSession(Message):
    type: Literal["open_session"] = "open_session"
    resume: str | None = None
    model: str | None = None
    title: str | None = None
    tags: list[str] | None = None
    system_prompt: str | None = None
    interactive: bool = False
    grant: ToolGrant | None = None
    """The tools the conversation runs without asking (``--allow-tools``, ``--approve``)."""
    discard_failed: bool = False
    """A new session whose every request failed at the provider is not kept (``ollm run``)."""


class RunTurn(Message):
    """Answered by the turn's items as they happen, up to its end."""

    type: Literal["run_turn"] = "run_turn"
    session_id: str
    text: str
    kinds: list[str] | None = None
    """The event kinds the client shows (``None``: every kind)."""


class AnswerApproval(Message):
    type: Literal["answer_approval"] = "answer_approval"
    session_id: str
    call_id: str
    approved: bool


class CancelTurn(Message):
    type: Literal["cancel_turn"] = "cancel_turn"
    session_id: str


class EndSession(Message):
    type: Literal["end_session"] = "end_session"
    session_id: str


class TakeNotices(Message):
    type: Literal["take_notices"] = "take_notices"


class Welcome(Message):
    type: Literal["welcome"] = "welcome"
    version: str


class SessionOpened(Message):
    type: Literal["session_opened"] = "session_opened"
    session_id: str
    model: str


class Done(Message):
    """The request was carried out and has nothing to return."""

    type: Literal["done"] = "done"


class PromptSizes(Message):
    """The sizes a :class:`~ollm_cli.pipeline.errors.PromptTooLargeError` names, which
    the client needs to cut the message with the user's consent (``--truncate-prompt``)."""

    prompt_tokens: int
    room_tokens: int
    window: int
    room_estimate: int


class Failed(Message):
    """The request failed with an :class:`~ollm_cli.pipeline.errors.OllmError`: its
    class (one of :data:`ERRORS`), message and hint (and a too-large prompt's sizes),
    raised again by the client."""

    type: Literal["failed"] = "failed"
    error: str
    message: str
    hint: str | None = None
    sizes: PromptSizes | None = None

    @classmethod
    def of(cls, error: BaseException) -> "Failed":
        if isinstance(error, PromptTooLargeError):
            sizes = PromptSizes(
                prompt_tokens=error.prompt_tokens,
                room_tokens=error.room_tokens,
                window=error.window,
                room_estimate=error.room_estimate,
            )
            return cls(
                error="PromptTooLargeError", message=error.message, hint=error.hint, sizes=sizes
            )
        if isinstance(error, OllmError):
            name = type(error).__name__ if type(error).__name__ in ERRORS else _base(error)
            return cls(error=name, message=error.message, hint=error.hint)
        return cls(error="OllmError", message=f"{type(error).__name__}: {error}")

    def exception(self) -> OllmError:
        if self.error == "PromptTooLargeError" and self.sizes is not None:
            return PromptTooLargeError(self.message, hint=self.hint, **self.sizes.model_dump())
        return ERRORS.get(self.error, OllmError)(self.message, hint=self.hint)


class Notices(Message):
    type: Literal["notices"] = "notices"
    lines: list[str]


class TurnEvent(Message):
    """An event of the turn, as it happens."""

    type: Literal["turn_event"] = "turn_event"
    event: AnyEvent


class ApprovalAsked(Message):
    """The turn waits for the user's answer (:class:`AnswerApproval`)."""

    type: Literal["approval_asked"] = "approval_asked"
    call: ToolCallPart


class TurnEnded(Message):
    type: Literal["turn_ended"] = "turn_ended"
    result: TurnResult


class TurnCancelled(Message):
    type: Literal["turn_cancelled"] = "turn_cancelled"


class TurnFailed(Message):
    type: Literal["turn_failed"] = "turn_failed"
    failure: Failed


SETTLING = (ApprovalAsked, TurnEnded, TurnCancelled, TurnFailed)
"""Items after which a turn waits for its client: it ended, or it asks a question."""


ENDING = (TurnEnded, TurnCancelled, TurnFailed)


ERRORS: dict[str, type[OllmError]] = {
    cls.__name__: cls
    for cls in (
        OllmError,
        UsageError,
        PromptTooLargeError,
        ConfigError,
        SessionError,
        SessionNotFoundError,
        SessionLockedError,
        StorageError,
        LoopDetectedError,
        ProviderError,
        ToolError,
        ActorFailedError,
        InvalidContextError,
        ServiceError,
        ServiceLostError,
    )
}
"""The errors a client raises again by name: the user sees the same message, hint and
exit code as in-process."""


def _base(error: OllmError) -> str:
    """The nearest class of :data:`ERRORS` (keeps the exit code of one we do not list)."""
    for cls in type(error).__mro__:
        if cls.__name__ in ERRORS:
            return cls.__name__
    return "OllmError"


CONVERSATION_REPLIES: dict[str, type[Message]] = {
    model.model_fields["type"].default: model
    for model in (
        Welcome,
        SessionOpened,
        Done,
        Failed,
        Notices,
        TurnEvent,
        ApprovalAsked,
        TurnEnded,
        TurnCancelled,
        TurnFailed,
    )
}
"""The replies of this module by their ``type``."""


__all__ = [
    "CONVERSATION_REPLIES",
    "ENDING",
    "ERRORS",
    "SETTLING",
    "AnswerApproval",
    "ApprovalAsked",
    "CancelTurn",
    "Done",
    "EndSession",
    "Failed",
    "Hello",
    "Message",
    "Notices",
    "OpenSession",
    "PromptSizes",
    "RunTurn",
    "SessionOpened",
    "TakeNotices",
    "TurnCancelled",
    "TurnEnded",
    "TurnEvent",
    "TurnFailed",
    "Welcome",
]
