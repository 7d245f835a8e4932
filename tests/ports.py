"""Ports on 127.0.0.1 held by the test for as long as it uses them.

Binding port 0, closing the socket and handing the number on is a race: between
the close and the use, any process on the machine may take the port (seven test
runs share this one). Here the socket stays bound while the test runs:

- :func:`refusing_port`: bound, not listening; Linux answers a connection to it
  with a reset, so a client sees "connection refused" exactly as with nobody there.
- :func:`silent_port`: listening, never accepting; a client connects and waits.

Servers the tests start themselves (``FakeOllama``, ``ThreadingHTTPServer``) bind
port 0 and report the port they got, which is race-free too.

Example::

    with refusing_port() as port:
        provider = OllamaProvider(OllamaSettings(host=f"http://127.0.0.1:{port}"))
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port where every connection is refused, until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@contextmanager
def silent_port(backlog: int = 8) -> Iterator[int]:
    """A port that accepts connections into its backlog and never answers them."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen(backlog)
        yield int(held.getsockname()[1])
