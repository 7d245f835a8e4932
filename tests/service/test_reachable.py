"""Whether the service's address answers: every client's look for the service."""

from __future__ import annotations

import socket
import subprocess
import sys

from ollm_cli.pipeline.service._processes import _reachable


def test_a_listening_address_is_reachable_and_a_closed_one_is_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert _reachable(f"127.0.0.1:{port}")
        assert _reachable(f"localhost:{port}")
    assert not _reachable(f"127.0.0.1:{port}")  # closed since
    assert not _reachable("no port")
    assert not _reachable("127.0.0.1:notaport")


def test_the_look_imports_no_idna_codec() -> None:
    """A str host is encoded with the idna codec, whose import (stringprep,
    unicodedata) was a share of a warm ``ollm run -p``'s own time."""
    code = (
        "import sys\n"
        "from ollm_cli.pipeline.service._processes import _reachable\n"
        "_reachable('127.0.0.1:1')\n"
        "print('encodings.idna' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
