"""The requests a pipeline host answers from its store and its provider, whatever
conversation the client holds: the recent sessions, a search, one session, a
title, the store's health and notices, the provider's models.

Example::

    reply = await answer_store_request(host.runtime, host.workspace, RecentSessions(limit=5))
"""

from __future__ import annotations

from pathlib import Path

from ollm_cli.actors.provider import ProviderShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.pipeline.runtime import Runtime
from ollm_cli.pipeline.service._protocol import (
    Done,
    GetSession,
    GetStoreHealth,
    Health,
    ListModels,
    Models,
    Notices,
    RecentSessions,
    Reply,
    SearchHits,
    SearchSessions,
    SessionRecord,
    Sessions,
    SetTitle,
    TakeNotices,
)

StoreRequest = (
    RecentSessions
    | SearchSessions
    | ListModels
    | GetSession
    | SetTitle
    | GetStoreHealth
    | TakeNotices
)
"""The requests :func:`answer_store_request` answers."""
STORE_REQUESTS = (
    RecentSessions,
    SearchSessions,
    ListModels,
    GetSession,
    SetTitle,
    GetStoreHealth,
    TakeNotices,
)


async def answer_store_request(runtime: Runtime, workspace: Path, request: StoreRequest) -> Reply:
    """The reply to ``request``, from the shells of ``runtime`` (``workspace``: the
    folder whose sessions ``RecentSessions(this_folder=True)`` lists)."""
    recording = runtime.recording
    match request:
        case RecentSessions(limit=limit):
            found = await recording.call(
                RecordingShell.list_sessions,
                limit=limit,
                working_dir=str(workspace) if request.this_folder else None,
                min_messages=1 if request.with_messages else 0,
            )
            return Sessions(sessions=found)
        case SearchSessions(query=query, limit=limit):
            return SearchHits(hits=await recording.call(RecordingShell.search, query, limit))
        case ListModels():
            return Models(names=await runtime.provider.call(ProviderShell.list_models))
        case GetSession(session_id=sid):
            return SessionRecord(session=await recording.call(RecordingShell.get_session, sid))
        case SetTitle(session_id=sid, title=title):
            await recording.call(RecordingShell.set_title, sid, title)
            return Done()
        case GetStoreHealth():
            return Health(health=await recording.call(RecordingShell.health))
        case TakeNotices():
            return Notices(lines=await recording.call(RecordingShell.take_notices))


__all__ = ["STORE_REQUESTS", "StoreRequest", "answer_store_request"]
