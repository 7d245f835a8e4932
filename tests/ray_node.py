"""Private Ray nodes for tests, on ports that Ray's own servers choose.

Picking a free port (bind port 0, close, pass the number on) and then starting
a Ray head on it is a race: between the close and the bind any process of the
shared machine may take the port. Ray takes ``0`` for each of its ports
instead: the GCS, the raylet's node and object managers and the agents bind a
port of their choosing and publish it. :func:`head_address` reads the head's
address back from the file ``ray start`` writes in its temp folder once the
head serves (``ray_current_cluster``).

Example::

    head = subprocess.Popen([*RAY_CLI, "start", "--head", *HEAD_PORTS, "--temp-dir", temp, ...])
    address = head_address(temp, head)       # "127.0.0.1:PORT", the port Ray chose
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.waiting import wait_until

RAY_CLI = [sys.executable, "-m", "ray.scripts.scripts"]
"""Ray's own command, run by this interpreter: no ``ray`` found on ``PATH`` (another
Python's, or none when an earlier test left ``PATH`` without it)."""

NODE_PORTS = [
    "--node-manager-port", "0",
    "--object-manager-port", "0",
    "--dashboard-agent-listen-port", "0",  # 52365 unless told
    "--min-worker-port", "0",
    "--max-worker-port", "0",
]  # fmt: skip
"""Every port of a node chosen by the server that binds it (the metrics, agent gRPC
and runtime-env agent ports are so unless given)."""

HEAD_PORTS = ["--port", "0", *NODE_PORTS]
"""A head's ports, its GCS's included."""

ADDRESS_FILE = "ray_current_cluster"


def head_address(temp_dir: str | Path, head: subprocess.Popen[bytes], timeout_s: float = 90) -> str:
    """``127.0.0.1:PORT`` of the head started by ``head`` with ``--temp-dir temp_dir``,
    once it serves (``ray start`` writes the file after the GCS bound its port)."""
    written = Path(temp_dir) / ADDRESS_FILE

    def published() -> str:
        if head.poll() is not None:
            raise AssertionError(f"`ray start --head` exited with {head.returncode}")
        return written.read_text().strip() if written.exists() else ""

    address = wait_until(published, timeout_s, what=f"the Ray head's address in {written}")
    port = int(address.rpartition(":")[2])
    return f"127.0.0.1:{port}"


GCS_CLIENT = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"key", None, timeout=10)
except Exception as error:
    print(type(error).__name__)
    sys.exit(3)
print("answered")
"""
"""A client of a Ray's GCS: it reads a key, or names why it cannot. (A refused
``ray.init`` retries for ~20 s before it gives up; the GCS client is refused at once.)"""


def gcs_answer(address: str, env: dict[str, str]) -> str:
    """What a client of the GCS at ``address`` with variables ``env`` gets:
    ``"answered"`` or ``"AuthenticationError"`` (anything else fails the test)."""
    done = subprocess.run(
        [sys.executable, "-c", GCS_CLIENT, address],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() in {"AuthenticationError", "answered"}, done.stderr
    return done.stdout.strip()
