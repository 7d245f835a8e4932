"""A command's connection to the local service's Unix socket (the thin client's
transport; the server's side and the trust rules are in
:mod:`ollm_cli.pipeline.service._socket`).

Requests go out as they are made, from any number of tasks at once (a batch runs
many conversations); a reader task hands each reply to the request of its ``id``.
If the connection ends, every call waiting or to come raises
:class:`~ollm_cli.pipeline.errors.ServiceLostError` (exit code 8).

The first request goes out right behind the :class:`Hello`, without waiting for the
service's answer to it (a round trip of a warm ``ollm run -p``): the service reads
nothing of a connection after its hello until it has welcomed the client, so a
client of another version is still refused before anything is done for it, and
that refusal is what each request raises.

Frames are those of :func:`~ollm_cli.pipeline.service._protocol.encode_request` and
:func:`~ollm_cli.pipeline.service._protocol.decode_service`, byte for byte, but made
with the model of each message sent or received alone: a command builds the schemas
of the few messages it uses, not of every request and reply (about as long as the
rest of a warm ``ollm run -p``). Only the messages of a conversation's life are
imported with this module (:mod:`~ollm_cli.pipeline.service._messages`); a reply of
another kind imports the rest of the protocol when it arrives (:func:`reply_model`).

Example::

    connection = ServiceConnection(settings, Path.cwd())
    await connection.start()                  # starts the service when needed
    reply = await connection.request(RecentSessions(limit=5))
    await connection.shutdown()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import orjson
from pydantic import ValidationError

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError, ServiceError
from ollm_cli.pipeline.service._messages import (
    CONVERSATION_REPLIES,
    Failed,
    Hello,
    Message,
    Welcome,
)
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    ServiceState,
    code_version,
    process_started,
)
from ollm_cli.pipeline.service._wire import (
    HEADER,
    MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES,
    FrameError,
    first_line,
    foreign_peer,
    peer,
    reachable_path,
    read_frame,
    service_lost,
)

if TYPE_CHECKING:
    from ollm_cli.pipeline.service._protocol import Reply, Request, ServiceFrame, SessionRequest

logger = logging.getLogger(__name__)


def encode_body(request_id: int, body: Request) -> bytes:
    """What ``encode_request(ClientFrame(id=request_id, body=body))`` sends, serialized
    by the body's model alone. A request the service would refuse for its size is
    :func:`encode_request`'s :class:`~ollm_cli.pipeline.errors.UsageError`."""
    data = b'{"id":%d,"body":%s}' % (request_id, body.model_dump_json(by_alias=True).encode())
    if len(data) > MAX_REQUEST_BYTES:
        from ollm_cli.pipeline.service._protocol import ClientFrame, encode_request

        return encode_request(ClientFrame(id=request_id, body=body))
    return HEADER.pack(len(data)) + data


def reply_model(tag: str) -> type[Message] | None:
    """The model of the reply whose ``type`` is ``tag`` (``None``: no reply has it).
    One not of a conversation's life (a ``/sessions``, a load run's) imports
    :mod:`~ollm_cli.pipeline.service._protocol`, once, when the first arrives."""
    model = CONVERSATION_REPLIES.get(tag)
    if model is None:
        from ollm_cli.pipeline.service._protocol import REPLIES

        model = REPLIES.get(tag)
    return model


def decode_reply(data: bytes) -> tuple[int, Reply]:
    """The id and body ``decode_service(data)`` gives, validated by the model of the
    reply's ``type`` alone (:func:`reply_model`);
    a frame that is not one (not JSON, no known type, another key) is left to
    :func:`~ollm_cli.pipeline.service._protocol.decode_service`, whose error says what
    is wrong with it."""
    try:
        frame = orjson.loads(data)
        model = reply_model(frame["body"]["type"])
        request_id = frame["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        model = None
    if model is None or frame.keys() != {"id", "body"} or type(request_id) is not int:
        from ollm_cli.pipeline.service._protocol import decode_service

        decoded: ServiceFrame = decode_service(data)
        return decoded.id, decoded.body
    return request_id, cast("Reply", model.model_validate_json(orjson.dumps(frame["body"])))


class ServiceConnection:
    """A command's connection to its home's service (see the module)."""

    def __init__(
        self,
        settings: OllmSettings,
        workspace: Path,
        *,
        environment: dict[str, str] | None = None,
        announce: Callable[[], None] | None = None,
    ) -> None:
        """``announce``: called when this connection is about to start the service
        (seconds), as :func:`~ollm_cli.pipeline.service._launch.ensure_service` says."""
        self.settings = settings
        self.announce = announce
        self.workspace = workspace
        self.environment = dict(os.environ if environment is None else environment)
        self.state: ServiceState | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._queues: dict[int, asyncio.Queue[Reply | OllmError]] = {}
        self._reading: asyncio.Task[None] | None = None
        self._lost: OllmError | None = None
        self._send_lock: asyncio.Lock | None = None
        self._starting: asyncio.Task[None] | None = None
        self._welcome: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and say hello (once), starting the service when needed and allowed;
        the service's answer to the hello is awaited by each request (see the module)."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        from ollm_cli.pipeline.service._launch import ensure_service

        loop = asyncio.get_running_loop()
        paths = ServicePaths.for_home(cluster=self.settings.runtime.ray_address)
        for attempt in (1, 2):
            self.state = await loop.run_in_executor(
                None,
                functools.partial(ensure_service, self.settings, paths, announce=self.announce),
            )
            try:
                self._reader, self._writer = await _open(paths.socket, self.state)
                break
            except ServiceError:
                # the service may have been stopping (idle) as this command reached it:
                # once it is gone, the next one is started
                if attempt == 2 or not await loop.run_in_executor(None, _gone, self.state):
                    raise
        self._lost = None
        self._send_lock = asyncio.Lock()
        self._reading = asyncio.ensure_future(self._read())
        hello = Hello(
            version=code_version(),
            pid=os.getpid(),
            started=process_started(os.getpid()),
            settings=self.settings.changed_sections(),
            workspace=str(self.workspace.resolve()),
            environment=self.environment,
        )
        self._welcome = asyncio.ensure_future(self._hear_welcome(await self._send(hello)))

    async def _hear_welcome(self, hello_id: int) -> None:
        try:
            reply = await self._next(hello_id)
        finally:
            self._queues.pop(hello_id, None)
        if isinstance(reply, Failed):
            raise reply.exception()
        if not isinstance(reply, Welcome):
            raise ServiceError(f"the OLLM service answered hello with {reply.type}")

    async def _send_welcomed(self, body: Request) -> int:
        """Send ``body`` (right behind the hello), then wait until the service has
        welcomed this client: its refusal is what this raises, the connection it
        then closed is not."""
        await self.start()
        assert self._welcome is not None
        try:
            request_id = await self._send(body)
        except OllmError:
            await asyncio.shield(self._welcome)
            raise
        try:
            await asyncio.shield(self._welcome)
        except BaseException:
            self._queues.pop(request_id, None)
            raise
        return request_id

    async def _read(self) -> None:
        assert self._reader is not None
        try:
            while (data := await read_frame(self._reader, MAX_REPLY_BYTES)) is not None:
                request_id, body = decode_reply(data)
                queue = self._queues.get(request_id)
                if queue is not None:
                    queue.put_nowait(body)
        except (FrameError, ValidationError, ConnectionError) as error:
            logger.warning("the OLLM service sent what is not a message: %s", first_line(error))
        finally:
            self._lost = service_lost()
            for queue in self._queues.values():
                queue.put_nowait(self._lost)

    async def _send(self, body: Request) -> int:
        if self._lost is not None:
            raise self._lost
        assert self._writer is not None and self._send_lock is not None
        request_id = next(self._ids)
        data = encode_body(request_id, body)
        self._queues[request_id] = asyncio.Queue()
        async with self._send_lock:
            try:
                self._writer.write(data)
                await self._writer.drain()
            except ConnectionError:
                self._queues.pop(request_id, None)
                raise service_lost() from None
        return request_id

    async def _next(self, request_id: int) -> Reply:
        item = await self._queues[request_id].get()
        if isinstance(item, OllmError):
            raise item
        return item

    async def request(self, body: SessionRequest) -> Reply:
        """Send ``body``; its one reply (a :class:`Failed` one is raised)."""
        request_id = await self._send_welcomed(body)
        try:
            reply = await self._next(request_id)
        finally:
            self._queues.pop(request_id, None)
        if isinstance(reply, Failed):
            raise reply.exception()
        return reply

    async def stream(
        self, body: SessionRequest, last: tuple[type[Message], ...]
    ) -> AsyncIterator[Reply]:
        """Send ``body`` (a turn, a load run); its replies as they come, up to one of
        the types of ``last`` (its end) or a :class:`Failed` one."""
        request_id = await self._send_welcomed(body)
        try:
            while True:
                reply = await self._next(request_id)
                yield reply
                if isinstance(reply, (*last, Failed)):
                    return
        finally:
            self._queues.pop(request_id, None)

    async def shutdown(self) -> None:
        """Leave the service (it keeps running)."""
        if self._welcome is not None:  # a refusal no request was left to hear
            self._welcome.cancel()
            await asyncio.gather(self._welcome, return_exceptions=True)
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
                await self._writer.wait_closed()


def _gone(state: ServiceState, timeout_s: float = 60.0) -> bool:
    """Wait (a while) for the daemon of ``state`` to end; whether it did."""
    deadline = time.monotonic() + timeout_s
    while state.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def _open(
    path: Path, state: ServiceState
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the service's socket, once its peer is shown to be the daemon
    of ``state`` run by this user."""
    address, folder = reachable_path(path)
    try:
        reader, writer = await asyncio.open_unix_connection(address, limit=2**20)
    except OSError as error:
        raise ServiceError(
            f"could not connect to the OLLM service's socket {path} ({type(error).__name__})",
            hint="`ollm service stop` and try again; see `ollm service logs`",
        ) from None
    finally:
        if folder is not None:
            os.close(folder)
    pid, uid = peer(writer.get_extra_info("socket"))
    refused = foreign_peer(path, pid, uid, state.pid)
    if refused is not None:
        writer.close()
        raise refused
    return reader, writer


__all__ = ["ServiceConnection"]
