"""The messages between a command and the local service: one pydantic model per
request, reply and turn item, so that nothing crosses the boundary as a method
name in a string or a tuple tagged by a string.

A conversation held by the service (:class:`~ollm_cli.pipeline.service.hosting._host.PipelineHost`)
is asked with a :data:`Request` and answers with a :data:`Reply`; a turn answers
with a stream of :data:`TurnItem` (its events as they happen, the tool-approval
questions it asks, then how it ended).

On the service's Unix socket (``OLLM_HOME/service/ollm.sock``, see
:mod:`ollm_cli.pipeline.service._socket`) each message is one frame: 4 bytes of
big-endian length, then the JSON of a :class:`ClientFrame` or :class:`ServiceFrame`,
whose ``id`` pairs a request with its replies (a turn has several). A frame
longer than the limit of its side, or one that does not validate, drops the
connection (the service logs it and keeps serving its other clients).

Example::

    frame = ClientFrame(id=1, body=OpenSession(resume="3f1c2a9e"))
    data = encode(frame)                    # b"\\x00\\x00\\x00\\x2a{...}"
    assert decode_client(data[4:]) == frame
"""

from __future__ import annotations

import struct
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import CompressionResult, SnapshotInfo
from ollm_cli.pipeline.context import ContextEntry, ContextSource
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
from ollm_cli.pipeline.harness._load_models import HarnessOptions, LoadReport
from ollm_cli.pipeline.records import (
    SearchHit,
    Session,
    SessionSummary,
    StoreHealth,
    ToolCallPart,
)
from ollm_cli.pipeline.tools import ToolGrant

HEADER = struct.Struct(">I")
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The largest frame a client may send (a message of a few megabytes, a context entry)."""
MAX_REPLY_BYTES = 512 * 1024 * 1024
"""The largest frame the service sends (``/history`` of a long session)."""


class Message(BaseModel):
    # built when first used: a client builds only the messages it sends and receives
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# ------------------------------------------------------------------ requests


class Hello(Message):
    """The first frame of a connection: who asks, for which configuration and folder."""

    type: Literal["hello"] = "hello"
    version: str
    pid: int
    started: float | None
    settings: OllmSettings
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


class ListContext(Message):
    type: Literal["list_context"] = "list_context"
    session_id: str


class AddContext(Message):
    type: Literal["add_context"] = "add_context"
    session_id: str
    key: str
    content: str
    priority: int = 50
    source: ContextSource = "user"
    ttl: float | None = None


class RemoveContext(Message):
    type: Literal["remove_context"] = "remove_context"
    session_id: str
    key: str


class CompressNow(Message):
    type: Literal["compress_now"] = "compress_now"
    session_id: str
    focus: str | None = None


class SnapshotNow(Message):
    type: Literal["snapshot_now"] = "snapshot_now"
    session_id: str


class RecentSessions(Message):
    type: Literal["recent_sessions"] = "recent_sessions"
    limit: int
    this_folder: bool = False
    """Only the sessions started in the client's workspace (``--continue``)."""
    with_messages: bool = False


class SearchSessions(Message):
    type: Literal["search_sessions"] = "search_sessions"
    query: str
    limit: int


class SwitchModel(Message):
    """``/model NAME``: the conversation's next turns go to ``model``."""

    type: Literal["switch_model"] = "switch_model"
    session_id: str
    model: str


class ListModels(Message):
    """``/model``: what the provider of the client's conversations has."""

    type: Literal["list_models"] = "list_models"


class GetSession(Message):
    type: Literal["get_session"] = "get_session"
    session_id: str


class SetTitle(Message):
    type: Literal["set_title"] = "set_title"
    session_id: str
    title: str


class GetStoreHealth(Message):
    type: Literal["store_health"] = "store_health"


class TakeNotices(Message):
    type: Literal["take_notices"] = "take_notices"


class PendingEvents(Message):
    """The events of a conversation its client has not seen yet (between turns)."""

    type: Literal["pending_events"] = "pending_events"
    session_id: str


class RunLoad(Message):
    """``ollm load`` and ``ollm soak``: run the harness on the pipeline of this
    connection's configuration (the run's own sessions folder), in the service;
    answered by :class:`LoadProgress` as turns finish, then :class:`LoadEnded`."""

    type: Literal["run_load"] = "run_load"
    options: HarnessOptions
    memory_threshold: float
    latency_threshold: float


class StopLoad(Message):
    """Ctrl-C: the run of ``tag`` finishes the turns in flight and reports."""

    type: Literal["stop_load"] = "stop_load"
    tag: str


SessionRequest = Annotated[
    OpenSession
    | RunTurn
    | AnswerApproval
    | CancelTurn
    | EndSession
    | ListContext
    | AddContext
    | RemoveContext
    | CompressNow
    | SnapshotNow
    | RecentSessions
    | SearchSessions
    | SwitchModel
    | ListModels
    | GetSession
    | SetTitle
    | GetStoreHealth
    | TakeNotices
    | PendingEvents
    | RunLoad
    | StopLoad,
    Field(discriminator="type"),
]
"""What a client asks of its conversations once it said :class:`Hello`."""

Request = Annotated[Hello | SessionRequest, Field(discriminator="type")]


# ------------------------------------------------------------------- replies


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
    def of(cls, error: BaseException) -> Failed:
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


class ContextEntries(Message):
    type: Literal["context_entries"] = "context_entries"
    entries: list[ContextEntry]


class Removed(Message):
    type: Literal["removed"] = "removed"
    removed: bool


class Compressed(Message):
    type: Literal["compressed"] = "compressed"
    result: CompressionResult | None


class SnapshotSaved(Message):
    type: Literal["snapshot_saved"] = "snapshot_saved"
    info: SnapshotInfo


class Sessions(Message):
    type: Literal["sessions"] = "sessions"
    sessions: list[SessionSummary]


class SearchHits(Message):
    type: Literal["search_hits"] = "search_hits"
    hits: list[SearchHit]


class Models(Message):
    type: Literal["models"] = "models"
    names: list[str]


class SessionRecord(Message):
    type: Literal["session_record"] = "session_record"
    session: Session


class Health(Message):
    type: Literal["health"] = "health"
    health: StoreHealth


class Notices(Message):
    type: Literal["notices"] = "notices"
    lines: list[str]


class Pending(Message):
    type: Literal["pending"] = "pending"
    events: list[AnyEvent]


class LoadProgress(Message):
    """How many measured turns of a load run have finished."""

    type: Literal["load_progress"] = "load_progress"
    turns: int


class LoadEnded(Message):
    """The load run ended, verified: its report."""

    type: Literal["load_ended"] = "load_ended"
    report: LoadReport


LoadItem = Annotated[LoadProgress | LoadEnded | Failed, Field(discriminator="type")]
"""What a load run produces for its client, in order."""


# ---------------------------------------------------------------- turn items


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


TurnItem = Annotated[
    TurnEvent | ApprovalAsked | TurnEnded | TurnCancelled | TurnFailed,
    Field(discriminator="type"),
]
"""What a turn produces for its client, in order."""


class TurnItems(Message):
    """A turn's items from ``cursor`` on, as the pipeline host hands them out."""

    items: list[TurnItem]
    cursor: int


SETTLING = (ApprovalAsked, TurnEnded, TurnCancelled, TurnFailed)
"""Items after which a turn waits for its client: it ended, or it asks a question."""
ENDING = (TurnEnded, TurnCancelled, TurnFailed)

Reply = Annotated[
    Welcome
    | SessionOpened
    | Done
    | Failed
    | ContextEntries
    | Removed
    | Compressed
    | SnapshotSaved
    | Sessions
    | SearchHits
    | Models
    | SessionRecord
    | Health
    | Notices
    | Pending
    | TurnEvent
    | ApprovalAsked
    | TurnEnded
    | TurnCancelled
    | TurnFailed
    | LoadProgress
    | LoadEnded,
    Field(discriminator="type"),
]


# -------------------------------------------------------------------- frames


class ClientFrame(Message):
    id: int
    body: Request


class ServiceFrame(Message):
    id: int
    body: Reply


def encode(frame: Message) -> bytes:
    """The frame as sent: its length, then its JSON (field aliases, as records are stored)."""
    data = frame.model_dump_json(by_alias=True).encode()
    return HEADER.pack(len(data)) + data


def encode_request(frame: ClientFrame) -> bytes:
    """A client's frame as sent; one the service would refuse for its size (a message
    of more than :data:`MAX_REQUEST_BYTES`, ``ollm run -p - < huge``) is a
    :class:`UsageError` here, rather than a connection the service drops."""
    data = encode(frame)
    if len(data) - HEADER.size > MAX_REQUEST_BYTES:
        raise UsageError(
            f"the request is {len(data) / 2**20:.1f} MiB, more than the "
            f"{MAX_REQUEST_BYTES // 2**20} MiB the OLLM service takes in one request",
            hint="send a smaller message, or run this command in its own process "
            "with `--runtime inprocess`",
        )
    return data


def decode_client(data: bytes) -> ClientFrame:
    return ClientFrame.model_validate_json(data)


def decode_service(data: bytes) -> ServiceFrame:
    return ServiceFrame.model_validate_json(data)


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


__all__ = [
    "ENDING",
    "ERRORS",
    "SETTLING",
    "Activity",
    "AskStatus",
    "ClientFrame",
    "Failed",
    "Hello",
    "HostActivity",
    "LoadEnded",
    "LoadItem",
    "LoadProgress",
    "Reply",
    "Request",
    "RunLoad",
    "ServiceFrame",
    "SessionRequest",
    "StatusAnswer",
    "StatusQuestion",
    "StatusReport",
    "StopLoad",
    "TurnItem",
    "TurnItems",
    "decode_client",
    "decode_opening",
    "decode_service",
    "encode",
]


# ------------------------------------------------------------ service status


class AskStatus(Message):
    """The one request of ``ollm service status``'s connection, sent instead of
    :class:`Hello`: it needs no pipeline, and a command of another version may ask
    (to say that the service is not its version)."""

    type: Literal["ask_status"] = "ask_status"


class Activity(Message):
    """What the idle check needs of a part of the service (the socket, a host)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    clients: int
    background: int
    last_active: float


class HostActivity(Activity):
    """What a pipeline host is doing (``ollm service status``, the idle check)."""

    workspace: str
    version: str
    pid: int
    sessions: int
    turns: int
    memory_rss: int


class StatusReport(Message):
    """The service's answer to :class:`AskStatus`. Fields unknown to this version are
    ignored: the report of a service of another version is still read."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    type: Literal["status_report"] = "status_report"
    version: str
    socket: Activity
    hosts: list[HostActivity]


class StatusQuestion(Message):
    """The frame of :class:`AskStatus` (the first and only of its connection)."""

    id: int
    body: AskStatus


class StatusAnswer(Message):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    id: int
    body: Annotated[StatusReport | Failed, Field(discriminator="type")]


def decode_opening(data: bytes) -> ClientFrame | StatusQuestion:
    """The first frame of a connection: a status question, or a client's frame (its
    :class:`Hello`, else the caller refuses the connection)."""
    from pydantic import TypeAdapter  # the daemon's only: this module's imports are the client's

    adapter: TypeAdapter[ClientFrame | StatusQuestion] = TypeAdapter(ClientFrame | StatusQuestion)
    return adapter.validate_json(data)
