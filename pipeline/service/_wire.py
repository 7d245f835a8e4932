"""What both ends of the local service's Unix socket share beneath the messages:
the frame, the peer, the socket's address, and the error a lost service is.

A frame is 4 bytes of big-endian length, then the JSON of one message (see
:mod:`ollm_cli.pipeline.service._messages`); a frame longer than its side's limit
ends the connection. The peer of a Unix socket is known by its credentials
(``SO_PEERCRED``): the service serves only its own user, and a client talks only
to the daemon its home's ``state.json`` names (:func:`foreign_peer`).

The service's side is :mod:`ollm_cli.pipeline.service._socket`, a command's
:mod:`ollm_cli.pipeline.service._connection`: a command imports this module, not the
server's.

Example::

    data = await read_frame(reader, MAX_REPLY_BYTES)   # None at the end of the stream
    pid, uid = peer(writer.get_extra_info("socket"))
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from pathlib import Path

from ollm_cli.pipeline.errors import OllmError, ServiceError

HEADER = struct.Struct(">I")
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The largest frame a client may send (a message of a few megabytes, a context entry)."""
MAX_REPLY_BYTES = 512 * 1024 * 1024
"""The largest frame the service sends (``/history`` of a long session)."""
PEERCRED = struct.Struct("3i")
_SOCKET_PATH_MAX = 100


class FrameError(Exception):
    """A frame that cannot be a message: too long, or not one of the protocol's."""


async def read_frame(reader: asyncio.StreamReader, limit: int) -> bytes | None:
    """The next frame's JSON (``None`` at the end of the stream)."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise FrameError("the stream ended inside a frame's header") from None
        return None
    (length,) = HEADER.unpack(header)
    if length > limit:
        raise FrameError(f"a frame of {length} bytes (at most {limit})")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("the stream ended inside a frame") from None


def peer(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket."""
    pid, uid, _ = PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def foreign_peer(path: Path, pid: int, uid: int, service_pid: int) -> ServiceError | None:
    """Why the process at the other end of the socket at ``path`` is not this user's
    service (its daemon, ``service_pid``), or None when it is."""
    if uid == os.getuid() and pid == service_pid:
        return None
    return ServiceError(
        f"the socket {path} is not the OLLM service's (its peer is process {pid} of "
        f"user {uid}); it was not used",
        hint="`ollm service stop` replaces it with the service's own",
    )


def reachable_path(path: Path) -> tuple[str, int | None]:
    """A path to ``path`` short enough for a Unix socket address (108 bytes): the
    path itself, or the same file through an open descriptor of its folder."""
    if len(str(path).encode()) <= _SOCKET_PATH_MAX:
        return str(path), None
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{folder}/{path.name}", folder


def service_lost(error: BaseException | None = None) -> OllmError:
    """The error a client raises when the local service died under it (exit code 8)."""
    from ollm_cli.pipeline.errors import ServiceLostError

    detail = f" ({type(error).__name__})" if error is not None else ""
    return ServiceLostError(
        f"the OLLM service stopped while serving this command{detail}",
        hint="everything acknowledged before this point is saved; run the command again "
        "(it starts a new service), and see `ollm service logs`",
    )


def first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


__all__ = [
    "HEADER",
    "MAX_REPLY_BYTES",
    "MAX_REQUEST_BYTES",
    "FrameError",
    "first_line",
    "foreign_peer",
    "peer",
    "reachable_path",
    "read_frame",
    "service_lost",
]
