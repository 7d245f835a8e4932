"""The pipeline host: the local service's actor that holds a whole pipeline and the
conversations running on it.

One host per configuration and workspace lives in the service as a named
detached Ray actor. It holds the service shells (recording, context, loop
detection, sanitizer, provider with its loaded model, compression, tool
workers) in its own process, and a :class:`~ollm_cli.pipeline.coordinator.Coordinator`
per attached conversation. The command line is a thin client:

- :meth:`PipelineHost.open_session` attaches a client (its pid) to a new or
  resumed conversation; a second live client on the same session is refused.
- :meth:`~PipelineHost.start_turn` runs a turn as a task of the host, not of
  the call, and answers with what the turn published within a short wait (the
  whole turn, its result included, when it is quick): a turn costs one round
  trip. The client polls :meth:`~PipelineHost.next_events` for the rest. Only
  the event kinds the client asked for travel (a batch wants ``loop:detected``,
  a load none, the chat all). A client that dies does not stop the turn: it
  is completed and recorded (or, if it is cancelled, recorded as cancelled).
- :meth:`~PipelineHost.detach` (or the client's death, seen by the watchdog)
  lets background work (title, compression, turn-end saves) finish within
  ``runtime.service.backgroundTimeout`` and then closes the session, releasing
  its lock. A client that reattaches before that finds the conversation as
  the host holds it.
- :meth:`~PipelineHost.start_load` runs ``ollm load`` or ``ollm soak`` on the
  host's shells (:class:`~ollm_cli.pipeline.service.hosting._host_load.HostedLoad`);
  the client reads its progress and report with :meth:`~PipelineHost.load_progress`.
- :meth:`~PipelineHost.activity` reports what the idle check and
  ``ollm service status`` need.

Its parts: a conversation held, with its unread items and approval questions
(:mod:`~ollm_cli.pipeline.service.hosting._hosted`); the coordinators, shared or a
chat's own (:mod:`~ollm_cli.pipeline.service.hosting._host_coordinators`); the requests
answered by the store and provider whatever the conversation
(:mod:`~ollm_cli.pipeline.service.hosting._store_requests`); a load run
(:mod:`~ollm_cli.pipeline.service.hosting._host_load`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import load_encoding_soon
from ollm_cli.pipeline.errors import OllmError, SessionLockedError, SessionNotFoundError
from ollm_cli.pipeline.events import AnyEvent, PipelineEvent
from ollm_cli.pipeline.runtime import create_runtime
from ollm_cli.pipeline.service._protocol import (
    AddContext,
    AnswerApproval,
    CancelTurn,
    Compressed,
    CompressNow,
    ContextEntries,
    Done,
    EndSession,
    Failed,
    HostActivity,
    ListContext,
    LoadItem,
    OpenSession,
    Pending,
    PendingEvents,
    RemoveContext,
    Removed,
    Reply,
    RunLoad,
    RunTurn,
    SessionRequest,
    SnapshotNow,
    SnapshotSaved,
    StopLoad,
    SwitchModel,
    TurnCancelled,
    TurnEnded,
    TurnEvent,
    TurnFailed,
    TurnItems,
)
from ollm_cli.pipeline.service.hosting._host_coordinators import HostCoordinators
from ollm_cli.pipeline.service.hosting._host_load import HostedLoad
from ollm_cli.pipeline.service.hosting._hosted import Client, Hosted
from ollm_cli.pipeline.service.hosting._store_requests import STORE_REQUESTS, answer_store_request
from ollm_cli.pipeline.tools import ToolGrant

logger = logging.getLogger(__name__)

WATCH_S = 0.5
"""How often the host looks for clients that died."""


def _imported_by_a_waiting_worker() -> bool:
    """Whether a Ray worker imported this module before it was asked for a host: as
    it started (the service's head preloads it, see ``ray_node._head.WORKER_MODULES``),
    not when the host was created in it."""
    if "ray" not in sys.modules:  # in-process: no Ray worker at all
        return False
    import ray
    from ray._private.worker import global_worker

    return bool(
        global_worker.mode == ray.WORKER_MODE and ray.get_runtime_context().get_actor_id() is None
    )


PRELOADED = _imported_by_a_waiting_worker()
"""This process's worker had the host's code before the host was asked for (the
cold start's breakdown in the log says which)."""


class PipelineHost:
    """A pipeline and its conversations inside the local service (see the module)."""

    def __init__(
        self,
        settings: OllmSettings,
        workspace: str,
        version: str,
        *,
        on_retire: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.workspace = Path(workspace)
        self.version = version
        self.runtime = create_runtime(settings, self.workspace, kind="inprocess")
        self.hosted: dict[str, Hosted] = {}
        self.coordinators = HostCoordinators(self.runtime, settings, self.workspace, self._route)
        self.clients: dict[str, Client] = {}
        """The clients connected to this host (each keeps it from idling out)."""
        self.loads: dict[str, HostedLoad] = {}
        """The load and soak runs on this host, by tag."""
        self.started_at = time.time()
        self.last_active = time.time()
        _log_to_service_log()
        logger.info(
            "pipeline host up %.2f s after its process started (its code imported %s)",
            _process_age(),
            "as its worker started" if PRELOADED else "when it was asked for",
        )
        self._start: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._on_retire = on_retire or _end_this_actor
        """What ends the host once it retired itself (its Ray actor is killed)."""

    # ----------------------------------------------------------------- basics

    async def ready(self) -> str:
        """Start the shells once; the version of OLLM this host runs."""
        if self._start is None:
            self._start = asyncio.ensure_future(self._start_shells())
            self._watch = asyncio.ensure_future(self._watchdog())
        await asyncio.shield(self._start)
        return self.version

    async def _start_shells(self) -> None:
        started = time.perf_counter()
        # the first turn counts tokens: the encoding loads while the client opens
        # its session (the shells make their counters without it)
        load_encoding_soon()
        await self.runtime.start()
        logger.info("shells started in %.2f s", time.perf_counter() - started)

    def _touch(self) -> None:
        self.last_active = time.time()

    async def hello(self, client_id: str, pid: int, started: float | None) -> None:
        """A client connected to this host (the service's socket says so)."""
        await self.ready()
        self.clients[client_id] = Client(pid, started)
        self._touch()

    async def bye(self, client_id: str) -> None:
        self.clients.pop(client_id, None)
        self._touch()

    # --------------------------------------------------------------- sessions

    async def open_session(
        self,
        pid: int,
        started: float | None,
        *,
        resume: str | None = None,
        environment: dict[str, str] | None = None,
        interactive: bool = False,
        grant: ToolGrant | None = None,
        discard_failed: bool = False,
        model: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
    ) -> tuple[str, str]:
        """Attach the client ``pid`` to a new or resumed conversation: (session id, model).

        ``title``, ``tags``, ``system_prompt`` and ``grant`` are those of
        :meth:`~ollm_cli.pipeline.coordinator.Coordinator.start_session` (a batch's;
        ``grant``: the tools ``ollm run --allow-tools`` lets run without asking;
        ``discard_failed``: ``ollm run``'s, a new session where every request failed
        is not kept)."""
        await self.ready()
        self._touch()
        if resume is not None:
            resume = await self._resolve(resume)
            held = self.hosted.get(resume)
            if held is not None:
                return await self._reattach(held, Client(pid, started), interactive, model, grant)
        began = time.perf_counter()
        coordinator = self.coordinators.for_conversation(environment, interactive=interactive)
        made = time.perf_counter()
        sid = await coordinator.start_session(
            resume=resume,
            model=model,
            title=title,
            tags=tags,
            system_prompt=system_prompt,
            grant=grant,
            discard_failed=discard_failed,
        )
        logger.info(
            "session %s opened in %.2f s (its coordinator %.2f s)",
            sid[:8],
            time.perf_counter() - began,
            made - began,
        )
        hosted = Hosted(sid, coordinator, Client(pid, started))
        self._wire(hosted)
        self.hosted[sid] = hosted
        return sid, coordinator.conversations[sid].model

    async def _resolve(self, session: str) -> str:
        """A full session id for an id or unique prefix (as the recording resolves it)."""
        for sid in self.hosted:
            if sid == session:
                return sid
        opened = [sid for sid in self.hosted if sid.startswith(session)]
        if len(opened) == 1:
            return opened[0]
        found = await self.runtime.recording.call(RecordingShell.get_session, session)
        return str(found.session_id)

    async def _reattach(
        self,
        held: Hosted,
        client: Client,
        interactive: bool,
        model: str | None,
        grant: ToolGrant | None = None,
    ) -> tuple[str, str]:
        if held.client is not None and held.client.alive():
            raise SessionLockedError(
                f"session {held.session_id[:8]} is open in another terminal "
                f"(process {held.client.pid})",
                hint="close it there first, or start a new session",
            )
        held.client = client
        if not self.coordinators.is_shared(held.coordinator):
            # a shared coordinator's conversations ask nothing, whoever reattaches
            held.coordinator.approval.interactive = interactive
            held.coordinator.ask = held.ask if interactive else None
        held.coordinator.conversations[held.session_id].grant = grant  # this command's
        if model:  # recorded in modeHistory, as a resume in a new conversation records it
            await held.coordinator.switch_model(held.session_id, model, trigger="--model")
        return held.session_id, held.coordinator.conversations[held.session_id].model

    def _route(self, event: PipelineEvent) -> None:
        """An event of a hosted conversation goes to its client, if of a kind it wants."""
        hosted = self.hosted.get(event.session_id)
        if hosted is not None and (hosted.kinds is None or event.kind in hosted.kinds):
            hosted.push(TurnEvent(event=event))

    def _wire(self, hosted: Hosted) -> None:
        if hosted.coordinator.approval.interactive:
            hosted.coordinator.ask = hosted.ask

    def _forget(self, hosted: Hosted) -> None:
        """The conversation is closed: a shared coordinator no conversation uses goes."""
        del self.hosted[hosted.session_id]
        coordinator = hosted.coordinator
        used = any(h.coordinator is coordinator for h in self.hosted.values())
        self.coordinators.release(coordinator, still_used=used)

    def _held(self, session_id: str, pid: int) -> Hosted:
        hosted = self.hosted.get(session_id)
        if hosted is None or hosted.client is None or hosted.client.pid != pid:
            raise SessionNotFoundError(
                f"session {session_id[:8]} is not open for this command in the service",
                hint="open it again with `ollm run --resume`",
            )
        return hosted

    # ------------------------------------------------------------------ turns

    async def start_turn(
        self,
        session_id: str,
        pid: int,
        text: str,
        kinds: list[str] | None = None,
        wait_s: float = 0.0,
    ) -> TurnItems:
        """Start a turn whose events of ``kinds`` (``None``: all) the client wants; what
        it published within ``wait_s`` (up to its result) and the cursor from which
        :meth:`next_events` reports the rest."""
        hosted = self._held(session_id, pid)
        if hosted.turn_running():
            raise OllmError(
                "a turn is already running in this session", hint="wait for it or cancel it"
            )
        self._touch()
        hosted.kinds = frozenset(kinds) if kinds is not None else None
        cursor = hosted.unread_for_new_turn()
        hosted.turn = asyncio.ensure_future(self._run_turn(hosted, text))
        if wait_s <= 0:
            return TurnItems(items=[], cursor=cursor)
        return await hosted.take(cursor, wait_s, until_done=True)

    async def _run_turn(self, hosted: Hosted, text: str) -> None:
        try:
            result = await hosted.coordinator.run_turn(hosted.session_id, text)
        except asyncio.CancelledError:
            hosted.push(TurnCancelled())
        except BaseException as error:  # the client raises it again, by its class
            hosted.push(TurnFailed(failure=Failed.of(error)))
        else:
            hosted.push(TurnEnded(result=result))
        finally:
            self._touch()

    async def next_events(
        self, session_id: str, pid: int, cursor: int, wait_s: float = 5.0
    ) -> TurnItems:
        """The items after ``cursor`` (waiting up to ``wait_s`` for one) and the new cursor."""
        return await self._held(session_id, pid).take(cursor, wait_s)

    async def pending(self, session_id: str, pid: int) -> list[AnyEvent]:
        """The events of the conversation its client has not read (a compression it
        asked for, one that finished in the background), at once."""
        hosted = self._held(session_id, pid)
        unread = await hosted.take(hosted.read, 0.0)
        return [item.event for item in unread.items if isinstance(item, TurnEvent)]

    async def answer(self, session_id: str, pid: int, call_id: str, approved: bool) -> None:
        """The user's answer to a tool-approval question."""
        self._held(session_id, pid).answer(call_id, approved)

    async def cancel_turn(self, session_id: str, pid: int) -> None:
        """Ctrl-C: stop the turn in flight (it is recorded as cancelled)."""
        hosted = self._held(session_id, pid)
        if hosted.turn is not None and hosted.turn_running():
            hosted.turn.cancel()
            await asyncio.gather(hosted.turn, return_exceptions=True)

    # ------------------------------------------------------------ load runs

    async def start_load(
        self, pid: int, started: float | None, request: RunLoad, environment: dict[str, str]
    ) -> None:
        """Start ``ollm load`` or ``ollm soak`` of the client ``pid`` on this host's shells."""
        await self.ready()
        self._touch()
        tag = request.options.tag
        if tag in self.loads and not self.loads[tag].done():
            raise OllmError(f"a load run tagged {tag} is already running", hint="use a new tag")
        client = Client(pid, started)
        self.loads[tag] = HostedLoad.start(
            self.runtime,
            self.settings,
            self.workspace,
            request,
            environment=environment,
            alive=client.alive,
        )

    async def load_progress(self, tag: str, seen: int, wait_s: float = 5.0) -> LoadItem:
        """How many turns of the run ``tag`` finished (once more than ``seen``, or after
        ``wait_s``), or its end: the report, or why it failed."""
        load = self.loads.get(tag)
        if load is None:
            raise OllmError(f"no load run tagged {tag} on this pipeline")
        item = await load.progress(seen, wait_s)
        self._touch()
        if load.done():
            self.loads.pop(tag, None)
        return item

    async def handle(self, pid: int, request: SessionRequest) -> Reply:
        """A request of the client ``pid`` on its conversations (a slash command, the
        store's health, ...), answered by a reply of its own type; an
        :class:`~ollm_cli.pipeline.errors.OllmError` is answered as :class:`Failed`."""
        await self.ready()
        self._touch()
        try:
            return await self._handle(pid, request)
        except OllmError as error:
            return Failed.of(error)
        finally:
            self._touch()

    async def _handle(self, pid: int, request: SessionRequest) -> Reply:
        if isinstance(request, STORE_REQUESTS):
            return await answer_store_request(self.runtime, self.workspace, request)
        match request:
            case ListContext(session_id=sid):
                entries = await self._held(sid, pid).coordinator.context.entries(sid)
                return ContextEntries(entries=entries)
            case AddContext():
                coordinator = self._held(request.session_id, pid).coordinator
                await coordinator.context.add(
                    request.session_id,
                    request.key,
                    request.content,
                    priority=request.priority,
                    source=request.source,
                    ttl=request.ttl,
                )
                return Done()
            case RemoveContext(session_id=sid, key=key):
                removed = await self._held(sid, pid).coordinator.context.remove(sid, key)
                return Removed(removed=removed)
            case CompressNow(session_id=sid, focus=focus):
                result = await self._held(sid, pid).coordinator.compress_now(sid, focus)
                return Compressed(result=result)
            case SnapshotNow(session_id=sid):
                return SnapshotSaved(info=await self._held(sid, pid).coordinator.snapshot_now(sid))
            case SwitchModel(session_id=sid, model=model):
                await self._held(sid, pid).coordinator.switch_model(sid, model)
                return Done()
            case PendingEvents(session_id=sid):
                return Pending(events=await self.pending(sid, pid))
        return await self._control(pid, request)

    async def _control(self, pid: int, request: SessionRequest) -> Reply:
        """The requests that steer a turn, a session or a load run."""
        match request:
            case AnswerApproval(session_id=sid, call_id=call_id, approved=approved):
                await self.answer(sid, pid, call_id, approved)
            case CancelTurn(session_id=sid):
                await self.cancel_turn(sid, pid)
            case EndSession(session_id=sid):
                await self.detach(sid, pid)
            case StopLoad(tag=tag):
                if tag in self.loads:
                    self.loads[tag].request_stop()
            case OpenSession() | RunTurn() | RunLoad():
                raise OllmError(
                    f"{request.type} has its own call on the pipeline host",
                    hint="this is a bug of OLLM's client: report it",
                )
            case _:  # pragma: no cover
                raise OllmError(f"unknown request {type(request).__name__}")
        return Done()

    async def detach(self, session_id: str, pid: int) -> None:
        """The client is done with the conversation: finish its background work, then
        close it (in the background: the client does not wait)."""
        hosted = self.hosted.get(session_id)
        if hosted is None or hosted.client is None or hosted.client.pid != pid:
            return
        self._release(hosted)

    def _release(self, hosted: Hosted) -> None:
        hosted.client = None
        hosted.refuse_questions()
        if hosted.closing is None or hosted.closing.done():
            hosted.closing = asyncio.ensure_future(self._close(hosted))

    async def _close(self, hosted: Hosted) -> None:
        sid = hosted.session_id
        limit = self.settings.runtime.service.background_timeout
        try:
            if hosted.turn is not None:
                await asyncio.gather(hosted.turn, return_exceptions=True)
            conversation = hosted.coordinator.conversations.get(sid)
            if conversation is not None:
                work = [
                    t
                    for t in (
                        conversation.title,
                        conversation.compression,
                        *conversation.background,
                    )
                    if t is not None
                ]
                if work:
                    await asyncio.wait(work, timeout=limit)
            if hosted.client is not None:  # a client reattached meanwhile
                return
            await hosted.coordinator.end_session(sid)
        except Exception as error:
            logger.warning("closing session %s failed: %s", sid, error)
        finally:
            if hosted.client is None and self.hosted.get(sid) is hosted:
                self._forget(hosted)
            self._touch()

    async def _watchdog(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            for hosted in list(self.hosted.values()):
                if hosted.client is not None and not hosted.client.alive():
                    logger.info("the client of session %s went away", hosted.session_id[:8])
                    self._release(hosted)
            for key, client in list(self.clients.items()):
                if not client.alive():
                    del self.clients[key]
            for load in self.loads.values():
                if not load.alive():
                    load.request_stop()  # its sessions are closed, its report unread
            if self.settings.runtime.ray_address and await self._retire_when_idle():
                return

    async def _retire_when_idle(self) -> bool:
        """On a Ray cluster (``runtime.rayAddress``) no daemon of ours watches the
        hosts: one idle for ``runtime.service.idleTimeout`` (no client, no background
        work) stops itself, as the local service retires its idle hosts."""
        service = self.settings.runtime.service
        activity = await self.activity()
        if activity.clients or activity.background:
            return False
        if time.time() - self.last_active < service.idle_timeout:
            return False
        logger.info("idle for %.0f s on the cluster: stopping", time.time() - self.last_active)
        self._watch = None  # this task: shutdown must not cancel it
        await self.shutdown(service.stop_timeout)
        self._on_retire()
        return True

    # ----------------------------------------------------------------- status

    async def activity(self) -> HostActivity:
        """What ``ollm service status`` and the idle check need."""
        turns = sum(1 for h in self.hosted.values() if h.turn_running())
        turns += sum(1 for load in self.loads.values() if not load.done())
        background = sum(h.background() for h in self.hosted.values())
        attached = sum(1 for h in self.hosted.values() if h.client is not None)
        rss = 0
        with contextlib.suppress(Exception):
            import psutil

            rss = int(psutil.Process(os.getpid()).memory_info().rss)
        return HostActivity(
            workspace=str(self.workspace),
            version=self.version,
            pid=os.getpid(),
            sessions=attached,
            clients=attached + len(self.clients),
            turns=turns,
            background=background + turns,
            last_active=self.last_active,
            memory_rss=rss,
        )

    async def shutdown(self, timeout_s: float) -> dict[str, int]:
        """Stop: finish turns and background work within ``timeout_s``, close every
        session (releasing its lock) and the shells."""
        for load in self.loads.values():
            load.request_stop()
        running = [load.task for load in self.loads.values() if load.task is not None]
        if running:
            await asyncio.wait(running, timeout=timeout_s)
        for hosted in list(self.hosted.values()):
            self._release(hosted)
        closing = [h.closing for h in self.hosted.values() if h.closing is not None]
        unfinished = 0
        if closing:
            _, pending = await asyncio.wait(closing, timeout=timeout_s)
            unfinished = len(pending)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for hosted in list(self.hosted.values()):  # cut short: close what is left
            with contextlib.suppress(Exception):
                await hosted.coordinator.end_session(hosted.session_id)
        self.hosted.clear()
        self.coordinators.clear()
        if self._watch is not None:
            self._watch.cancel()
        if self._start is not None:
            with contextlib.suppress(Exception):
                await self.runtime.shutdown()
        return {"unfinished": unfinished}


def _process_age() -> float:
    """Seconds since this process started (the cold start's breakdown in the log)."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except Exception:  # pragma: no cover - psutil is a dependency
        return 0.0


def _log_to_service_log() -> None:
    """This host's log records go to the service's log (``ollm service logs``)."""
    from ollm_cli.pipeline.environment import configure_logging
    from ollm_cli.pipeline.service._state import ServicePaths

    handler = logging.FileHandler(ServicePaths.for_home().log)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s host[{os.getpid()}] %(levelname)s %(name)s %(message)s")
    )
    handler.setLevel(logging.INFO)
    logging.getLogger().addHandler(handler)
    with contextlib.suppress(Exception):
        configure_logging(logging.INFO)  # redacts on every handler, ours included


def _end_this_actor() -> None:
    """Kill the Ray actor this host is (it retired itself on a cluster)."""
    import ray

    ray.kill(ray.get_runtime_context().current_actor, no_restart=True)


__all__ = ["PipelineHost"]
