"""The local service's Unix socket: how a command reaches its conversations
without Ray.

The service's daemon is the only Ray driver. It listens on
``OLLM_HOME/service/ollm.sock`` (the folder is 0700, the socket 0600) and
relays each client's requests (:mod:`ollm_cli.pipeline.service._protocol`) to
the pipeline host of the client's configuration and workspace; a turn's items
are written to the client as the host hands them out. A command is a thin
client (:class:`~ollm_cli.pipeline.service._connection.ServiceConnection`): it
imports neither Ray nor the pipeline.

Trust, both ways:

- the service serves only its own user: the peer's uid (``SO_PEERCRED``) must be
  the daemon's, else the connection is dropped and logged;
- a client talks only to the daemon named in ``state.json``: the socket's peer
  must be that process (a socket file left by a dead service, or put there by
  someone else, is never trusted; the next daemon replaces it);
- a client of another OLLM version is refused with what to do;
- a frame too long or that does not validate drops that connection only.

Example::

    listener = bind_socket(ServicePaths.for_home())      # in the daemon
    await ServiceServer(daemon_host).serve(listener, stop)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ConfigError, OllmError, ServiceError
from ollm_cli.pipeline.service._protocol import (
    ENDING,
    Activity,
    Failed,
    Hello,
    HostActivity,
    LoadItem,
    LoadProgress,
    OpenSession,
    Reply,
    Request,
    RunLoad,
    RunTurn,
    ServiceFrame,
    SessionOpened,
    StatusAnswer,
    StatusQuestion,
    StatusReport,
    TurnItems,
    Welcome,
    decode_client,
    decode_opening,
    encode,
)
from ollm_cli.pipeline.service._state import ServicePaths, code_version
from ollm_cli.pipeline.service._wire import (
    MAX_REQUEST_BYTES,
    FrameError,
    first_line,
    peer,
    reachable_path,
    read_frame,
    service_lost,
)

logger = logging.getLogger(__name__)

POLL_S = 5.0
"""How long the service waits at the host for a turn's next item before asking again."""
LIVE_KINDS = frozenset(
    {"model:text", "model:thinking", "pipeline:status", "session:message", "tool:call"}
)
"""Event kinds shown as they happen; a client that wants none of them (a batch, a load)
gets a quick turn's items in one round trip to the host."""
STATUS_WAIT_S = 10.0
"""How long ``ollm service status`` waits for a host's answer (a busy host's is late)."""


# -------------------------------------------------------------------- server


def bind_socket(paths: ServicePaths) -> socket.socket:
    """The daemon's listening socket, replacing whatever file was at its path (the
    daemon holds the start lock: a file there is a dead service's)."""
    paths.ensure()
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()
    address, folder = reachable_path(paths.socket)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(address)
    finally:
        os.umask(old)
        if folder is not None:
            os.close(folder)
    os.chmod(paths.socket, 0o600)
    listener.listen(128)
    listener.setblocking(False)
    return listener


class ServiceServer:
    """Relays clients' requests to the pipeline hosts (see the module).

    ``host_for`` gives the Ray handle of the host of a configuration and workspace
    (blocking: it runs on a thread); ``retire_host`` stops one (a load run's own);
    ``list_hosts`` gives the handles of the running hosts (blocking), whose
    activities ``ollm service status`` reports; ``forget_host`` is told of a host
    ``host_for`` gave that turned out dead (``host_for`` keeps its handles: the
    daemon's :class:`~ollm_cli.pipeline.service._hosts.HostCache`), and the hello
    asks ``host_for`` once more.
    """

    def __init__(
        self,
        host_for: Callable[[OllmSettings, Path], Any],
        retire_host: Callable[[Any, float], Any] | None = None,
        list_hosts: Callable[[], list[Any]] | None = None,
        forget_host: Callable[[Any], None] | None = None,
    ) -> None:
        self.host_for = host_for
        self.retire_host = retire_host
        self.list_hosts = list_hosts
        self.forget_host = forget_host
        self.clients = 0
        self.last_active = time.time()

    def activity(self) -> Activity:
        """The socket's part of the idle check: a connected client keeps the service."""
        return Activity(clients=self.clients, background=0, last_active=self.last_active)

    async def status(self) -> StatusReport:
        """What ``ollm service status`` shows: this version, and what each host does
        (a host that does not answer within :data:`STATUS_WAIT_S` is left out)."""
        handles: list[Any] = []
        if self.list_hosts is not None:
            handles = await asyncio.get_running_loop().run_in_executor(None, self.list_hosts)
        answers = await asyncio.gather(
            *(asyncio.wait_for(_Relay._call(h.activity), STATUS_WAIT_S) for h in handles),
            return_exceptions=True,
        )
        hosts = [answer for answer in answers if isinstance(answer, HostActivity)]
        # the connection that asks is not one of the clients reported
        socket = self.activity().model_copy(update={"clients": max(self.clients - 1, 0)})
        return StatusReport(version=code_version(), socket=socket, hosts=hosts)

    async def retire(self, host: Any, settings: OllmSettings) -> None:
        """Stop ``host`` once its sessions are closed (blocking: it runs on a thread)."""
        if self.retire_host is None:
            return
        timeout = settings.runtime.service.stop_timeout
        with contextlib.suppress(Exception):
            await asyncio.get_running_loop().run_in_executor(None, self.retire_host, host, timeout)

    async def serve(self, listener: socket.socket, stop: asyncio.Event) -> None:
        server = await asyncio.start_unix_server(self._client, sock=listener, limit=2**20)
        async with server:
            await stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pid, uid = peer(writer.get_extra_info("socket"))
        relay = _Relay(self, writer, pid)
        try:
            if uid != os.getuid():
                logger.warning("refused a client of another user (uid %d, pid %d)", uid, pid)
                return
            self.clients += 1
            self.last_active = time.time()
            await relay.run(reader)
        except (FrameError, ValidationError) as error:
            logger.warning("dropped client %d: a malformed message (%s)", pid, first_line(error))
        except (ConnectionError, asyncio.IncompleteReadError):
            logger.info("client %d went away", pid)
        finally:
            self.clients -= uid == os.getuid()
            self.last_active = time.time()
            await relay.close()


def _settings(hello: Hello) -> OllmSettings:
    """The settings a client sent in its hello (the sections it changed), validated
    whole; a :class:`ConfigError` naming the keys (never their values) if not."""
    try:
        return OllmSettings.model_validate(hello.settings)
    except ValidationError as error:
        keys = ", ".join(".".join(map(str, e["loc"])) for e in error.errors())
        raise ConfigError(
            f"the OLLM service refused this command's settings ({keys})",
            hint="check them with `ollm config show`; if they are valid there, the "
            "service is of another version: `ollm service stop`",
        ) from None


class _Relay:
    """One client's connection, in the daemon."""

    def __init__(self, server: ServiceServer, writer: asyncio.StreamWriter, pid: int) -> None:
        self.server = server
        self.writer = writer
        self.pid = pid
        self.started: float | None = None
        self.host: Any = None
        self.hello: Hello | None = None
        self.settings: OllmSettings | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.client_id = os.urandom(8).hex()
        self._lock = asyncio.Lock()

    async def send(self, request_id: int, body: Reply) -> None:
        data = encode(ServiceFrame(id=request_id, body=body))
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()

    async def run(self, reader: asyncio.StreamReader) -> None:
        data = await read_frame(reader, MAX_REQUEST_BYTES)
        if data is None:
            return
        first = decode_opening(data)
        if isinstance(first, StatusQuestion):
            await self._status(first.id)
            return
        if not isinstance(first.body, Hello):
            raise FrameError(f"the first message is {first.body.type}, not hello")
        if not await self._welcome(first.id, first.body):
            return
        while (data := await read_frame(reader, MAX_REQUEST_BYTES)) is not None:
            frame = decode_client(data)
            task = asyncio.ensure_future(self._serve(frame.id, frame.body))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _status(self, request_id: int) -> None:
        """Answer ``ollm service status`` (of any version: it reads what it knows)."""
        try:
            answer = StatusAnswer(id=request_id, body=await self.server.status())
        except OllmError as error:
            answer = StatusAnswer(id=request_id, body=Failed.of(error))
        async with self._lock:
            self.writer.write(encode(answer))
            await self.writer.drain()

    async def _welcome(self, request_id: int, hello: Hello) -> bool:
        import psutil

        if hello.version != code_version():
            await self.send(
                request_id,
                Failed.of(
                    ServiceError(
                        f"the running OLLM service is version {code_version()}, this command "
                        f"is {hello.version}",
                        hint="run `ollm service stop` once its work is done (the next command "
                        "starts this version), or run this one with --runtime inprocess",
                    )
                ),
            )
            return False
        with contextlib.suppress(psutil.Error):
            self.started = psutil.Process(self.pid).create_time()
        try:
            settings = _settings(hello)
            await self._greet_host(hello, settings)
        except OllmError as error:
            await self.send(request_id, Failed.of(error))
            return False
        self.hello = hello
        self.settings = settings
        await self.send(request_id, Welcome(version=code_version()))
        return True

    async def _greet_host(self, hello: Hello, settings: OllmSettings) -> None:
        """Find the client's host and tell it of the client: the host counts it as
        activity (its idle check must not retire it while the client opens its first
        session) until the connection ends. A kept host that died meanwhile is
        forgotten, and found (or started) again once."""
        from ollm_cli.pipeline.errors import ServiceLostError

        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            self.host = await loop.run_in_executor(
                None, self.server.host_for, settings, Path(hello.workspace)
            )
            try:
                await self._call(self.host.hello, self.client_id, self.pid, self.started)
                return
            except ServiceLostError:  # the host is dead (Ray's RayActorError)
                if self.server.forget_host is None or attempt == 2:
                    raise
                logger.info("a pipeline host had died: starting another")
                self.server.forget_host(self.host)

    async def _serve(self, request_id: int, body: Request) -> None:
        try:
            if isinstance(body, RunTurn):
                await self._turn(request_id, body)
            elif isinstance(body, RunLoad):
                await self._load(request_id, body)
            elif isinstance(body, OpenSession):
                await self.send(request_id, await self._open(body))
            elif isinstance(body, Hello):
                raise OllmError("hello was said already")
            else:
                await self.send(request_id, await self._call(self.host.handle, self.pid, body))
        except OllmError as error:
            await self.send(request_id, Failed.of(error))
        except ConnectionError:
            pass  # the client is gone; what it asked goes on in the host

    async def _open(self, body: OpenSession) -> Reply:
        assert self.hello is not None
        sid, model = await self._call(
            self.host.open_session,
            self.pid,
            self.started,
            resume=body.resume,
            environment=self.hello.environment,
            interactive=body.interactive,
            grant=body.grant,
            discard_failed=body.discard_failed,
            model=body.model,
            title=body.title,
            tags=body.tags,
            system_prompt=body.system_prompt,
        )
        return SessionOpened(session_id=sid, model=model)

    async def _turn(self, request_id: int, body: RunTurn) -> None:
        """The turn's items, written as the host hands them out, up to its end."""
        live = body.kinds is None or bool(LIVE_KINDS & set(body.kinds))
        batch: TurnItems = await self._call(
            self.host.start_turn,
            body.session_id,
            self.pid,
            body.text,
            body.kinds,
            0.0 if live else POLL_S,
        )
        while True:
            for item in batch.items:
                await self.send(request_id, item)
                if isinstance(item, ENDING):
                    return
            batch = await self._call(
                self.host.next_events, body.session_id, self.pid, batch.cursor, POLL_S
            )

    async def _load(self, request_id: int, body: RunLoad) -> None:
        """A load run in the host: its progress as turns finish, then its report.
        The run's pipeline (its own sessions folder, which no other command uses)
        is retired before the report is sent, instead of staying loaded until idle."""
        assert self.hello is not None and self.settings is not None
        await self._call(self.host.start_load, self.pid, self.started, body, self.hello.environment)
        seen = 0
        try:
            while True:
                item: LoadItem = await self._call(
                    self.host.load_progress, body.options.tag, seen, POLL_S
                )
                if not isinstance(item, LoadProgress):
                    break
                if item.turns != seen:
                    seen = item.turns
                    await self.send(request_id, item)
        finally:
            await asyncio.shield(self.server.retire(self.host, self.settings))
        await self.send(request_id, item)

    @staticmethod
    async def _call(method: Any, *args: Any, **kwargs: Any) -> Any:
        """A call on the host; what it raised, as the error it is."""
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return await method.remote(*args, **kwargs)
        except RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, OllmError):
                raise cause from None
            raise OllmError(f"the pipeline host failed: {first_line(error)}") from None
        except RayActorError:
            raise service_lost() from None

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        if self.hello is not None:
            with contextlib.suppress(Exception):
                await self._call(self.host.bye, self.client_id)
        with contextlib.suppress(Exception):
            self.writer.close()
            await self.writer.wait_closed()


__all__ = ["ServiceServer", "bind_socket"]
