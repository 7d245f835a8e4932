"""``ollm service status``: whether the service runs, and what its hosts do.

The command asks the service's daemon on its socket (one :class:`AskStatus`, one
:class:`StatusReport`), as every other command does: it imports no Ray and
never becomes a driver of the service's Ray. The socket is trusted only if its
peer is the daemon named in ``state.json`` (as for every client).

Example::

    print(service_status().model_dump())
"""

from __future__ import annotations

import logging
import os
import socket
import time

from pydantic import BaseModel, ValidationError

from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.service._processes import find_service
from ollm_cli.pipeline.service._protocol import (
    HEADER,
    MAX_REPLY_BYTES,
    AskStatus,
    Failed,
    StatusAnswer,
    StatusQuestion,
    StatusReport,
    encode,
)
from ollm_cli.pipeline.service._state import ServicePaths, ServiceState, code_version
from ollm_cli.pipeline.service._wire import foreign_peer, peer, reachable_path

logger = logging.getLogger(__name__)

ASK_TIMEOUT_S = 30.0
"""How long the command waits for the daemon's report (each host answers within 10 s)."""


class HostStatus(BaseModel):
    workspace: str
    pid: int
    sessions: int
    clients: int
    background: int
    memory_rss: int


class ServiceStatus(BaseModel):
    """``ollm service status``."""

    running: bool
    home: str
    address: str | None = None
    pid: int | None = None
    uptime_s: float | None = None
    version: str | None = None
    client_version: str
    sessions: int = 0
    clients: int = 0
    background: int = 0
    hosts: list[HostStatus] = []
    log: str


def service_status(paths: ServicePaths | None = None) -> ServiceStatus:
    """How the service is, without starting it."""
    paths = paths or ServicePaths.for_home()
    state = find_service(paths)
    status = ServiceStatus(
        running=state is not None,
        home=str(paths.home),
        client_version=code_version(),
        log=str(paths.log),
    )
    if state is None:
        return status
    status.address = state.address
    status.pid = state.pid
    status.uptime_s = round(time.time() - state.started_at, 1)
    status.version = state.version
    report = ask_status(paths, state)
    for activity in report.hosts:
        status.hosts.append(HostStatus.model_validate(activity.model_dump()))
        status.sessions += activity.sessions
        status.clients += activity.clients
        status.background += activity.background
    return status


def ask_status(
    paths: ServicePaths, state: ServiceState, timeout_s: float = ASK_TIMEOUT_S
) -> StatusReport:
    """The report of the daemon of ``state``, asked on its socket."""
    try:
        with _connect(paths, state, timeout_s) as connection:
            connection.sendall(encode(StatusQuestion(id=1, body=AskStatus())))
            (length,) = HEADER.unpack(_read_exactly(connection, HEADER.size))
            if length > MAX_REPLY_BYTES:
                raise ValueError(f"a frame of {length} bytes")
            answer = StatusAnswer.model_validate_json(_read_exactly(connection, length))
    except (OSError, ValueError, ValidationError) as error:
        raise ServiceError(
            f"the OLLM service (pid {state.pid}) did not answer on its socket "
            f"({type(error).__name__})",
            hint="`ollm service stop` and try again; see `ollm service logs`",
        ) from None
    if isinstance(answer.body, Failed):
        raise answer.body.exception()
    return answer.body


def _connect(paths: ServicePaths, state: ServiceState, timeout_s: float) -> socket.socket:
    """A connection to the socket whose peer is the daemon of ``state``, of this user."""
    address, folder = reachable_path(paths.socket)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout_s)
    try:
        connection.connect(address)
        pid, uid = peer(connection)
    except OSError:
        connection.close()
        raise
    finally:
        if folder is not None:
            os.close(folder)
    refused = foreign_peer(paths.socket, pid, uid, state.pid)
    if refused is not None:
        connection.close()
        raise refused
    return connection


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = connection.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("the service closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


__all__ = ["HostStatus", "ServiceStatus", "ask_status", "service_status"]
