"""The messages between a command and the local service: one pydantic model per
request, reply and turn item, so that nothing crosses the boundary as a method
name in a string or a tuple tagged by a string.

The messages of a conversation's life (hello, open, a turn and its items, end,
notices, a failure) are defined in :mod:`ollm_cli.pipeline.service._messages`, all a
warm ``ollm run -p`` imports; this module adds the others (the chat's commands, a
load run's, the status question) and the unions every frame is validated with, and
names them all.

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

import functools
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import ConfigDict, Field

from ollm_cli.pipeline.compression import CompressionResult, SnapshotInfo
from ollm_cli.pipeline.context import ContextEntry, ContextSource
from ollm_cli.pipeline.errors import UsageError
from ollm_cli.pipeline.events import AnyEvent
from ollm_cli.pipeline.harness._load_models import HarnessOptions, LoadReport
from ollm_cli.pipeline.records import SearchHit, Session, SessionSummary, StoreHealth
from ollm_cli.pipeline.service._messages import (
    CONVERSATION_REPLIES,
    ENDING,
    ERRORS,
    SETTLING,
    AnswerApproval,
    ApprovalAsked,
    CancelTurn,
    Done,
    EndSession,
    Failed,
    Hello,
    Message,
    Notices,
    OpenSession,
    PromptSizes,
    RunTurn,
    SessionOpened,
    TakeNotices,
    TurnCancelled,
    TurnEnded,
    TurnEvent,
    TurnFailed,
    Welcome,
)
from ollm_cli.pipeline.service._wire import HEADER, MAX_REPLY_BYTES, MAX_REQUEST_BYTES

if TYPE_CHECKING:
    from pydantic import TypeAdapter

# ------------------------------------------------------------------ requests


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


TurnItem = Annotated[
    TurnEvent | ApprovalAsked | TurnEnded | TurnCancelled | TurnFailed,
    Field(discriminator="type"),
]
"""What a turn produces for its client, in order."""


class TurnItems(Message):
    """A turn's items from ``cursor`` on, as the pipeline host hands them out."""

    items: list[TurnItem]
    cursor: int


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

REPLIES: dict[str, type[Message]] = {
    **CONVERSATION_REPLIES,
    **{
        model.model_fields["type"].default: model
        for model in (
            ContextEntries,
            Removed,
            Compressed,
            SnapshotSaved,
            Sessions,
            SearchHits,
            Models,
            SessionRecord,
            Health,
            Pending,
            LoadProgress,
            LoadEnded,
        )
    },
}
"""Each reply's model by its ``type`` (every member of :data:`Reply`)."""


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


__all__ = [
    "ENDING",
    "ERRORS",
    "HEADER",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "REPLIES",
    "SETTLING",
    "Activity",
    "AddContext",
    "AnswerApproval",
    "ApprovalAsked",
    "AskStatus",
    "CancelTurn",
    "ClientFrame",
    "CompressNow",
    "Compressed",
    "ContextEntries",
    "Done",
    "EndSession",
    "Failed",
    "GetSession",
    "GetStoreHealth",
    "Health",
    "Hello",
    "HostActivity",
    "ListContext",
    "ListModels",
    "LoadEnded",
    "LoadItem",
    "LoadProgress",
    "Message",
    "Models",
    "Notices",
    "OpenSession",
    "Pending",
    "PendingEvents",
    "PromptSizes",
    "RecentSessions",
    "RemoveContext",
    "Removed",
    "Reply",
    "Request",
    "RunLoad",
    "RunTurn",
    "SearchHits",
    "SearchSessions",
    "ServiceFrame",
    "SessionOpened",
    "SessionRecord",
    "SessionRequest",
    "Sessions",
    "SetTitle",
    "SnapshotNow",
    "SnapshotSaved",
    "StatusAnswer",
    "StatusQuestion",
    "StatusReport",
    "StopLoad",
    "SwitchModel",
    "TakeNotices",
    "TurnCancelled",
    "TurnEnded",
    "TurnEvent",
    "TurnFailed",
    "TurnItem",
    "TurnItems",
    "Welcome",
    "decode_client",
    "decode_opening",
    "decode_service",
    "encode",
    "encode_request",
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
    return _opening_adapter().validate_json(data)


@functools.cache
def _opening_adapter() -> TypeAdapter[ClientFrame | StatusQuestion]:
    """Built once per process (the daemon's: a few ms of every connection's start)."""
    from pydantic import TypeAdapter  # the daemon's only: this module's imports are the client's

    return TypeAdapter(ClientFrame | StatusQuestion)
