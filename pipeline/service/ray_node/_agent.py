"""The agents of the service's own Ray head: what its raylet needs of each.

A raylet starts two agents and waits for both before it registers its node:

- the dashboard agent, which publishes three ports in the session folder: the
  metrics agent's, the metrics export's and the agent's HTTP listener's. Each
  is a file named ``<port name>_<node id>`` holding the port in decimal, ``-1``
  for a service the agent does not run;
- the runtime environment agent, which publishes the port of its HTTP listener
  the same way (``runtime_env_agent_port_<node id>``). The raylet asks it for a
  worker's runtime environment (packages, a working folder, variables) only
  when a task or actor names one: the service's never do (a host on a cluster
  does, but that is the cluster's Ray, not this head).

The raylet then watches each agent's process (and ends if it ends); each agent
watches the raylet: it ends when the raylet's pipe on its stdin closes or,
without that pipe, when the raylet's process is gone.

Ray's own agents import Ray first, and its dashboard agent then every module of
its dashboard (jobs, logs, metrics, events, health) before it publishes: 1.3 s
of CPU, and about 3 s of a cold start on a busy 2-core machine spent by the
raylet waiting; its runtime environment agent imports aiohttp too (0.9 s of a
core, the raylet's whole wait once the dashboard's was gone). The service uses
none of what they serve: no dashboard, no job submission, no metrics, no state
API (the minimal dashboard agent Ray gives a service without them publishes
``-1`` for all three ports as well), no runtime environments. This script
stands for either (``--ollm-agent=dashboard``, the default, or
``--ollm-agent=runtime_env``): it publishes at once, serves nothing (the
runtime environment agent's listener answers every request that it provides
no runtime environment, and says so in its log), and imports only the
standard library's modules it needs: it runs as ``python -I -S <this file>``,
outside the package, the raylet's arguments after it.

Example (what the raylet runs)::

    python -I -S .../ray_node/_agent.py .../agent.py --node-id=<hex> --session-dir=<dir> ...
    python -I -S .../ray_node/_agent.py --ollm-agent=runtime_env .../main.py --node-id=<hex> ...
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

ROLE = "ollm-agent"
"""The argument that says which of the raylet's agents this one stands for."""

PORT_NAMES = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port")
"""The ports a raylet waits for from its dashboard agent (``ray._raylet``'s
``METRICS_AGENT_PORT_NAME``, ``METRICS_EXPORT_PORT_NAME`` and
``DASHBOARD_AGENT_LISTEN_PORT_NAME``)."""

RUNTIME_ENV_PORT_NAME = "runtime_env_agent_port"
"""The runtime environment agent's port (``ray._raylet.RUNTIME_ENV_AGENT_PORT_NAME``)."""

NOT_SERVED = -1
"""The port of a service the agent does not run, as Ray's minimal agent writes it."""

PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"
"""Set by the raylet when the agent's stdin is a pipe the raylet holds open."""


def options(argv: list[str]) -> dict[str, str]:
    """The ``--name=value`` arguments the raylet passes to its dashboard agent."""
    found = {}
    for argument in argv:
        name, equals, value = argument.partition("=")
        if argument.startswith("--") and equals:
            found[name[2:]] = value
    return found


def publish_ports(session_dir: str, node_id: str) -> None:
    """Each of :data:`PORT_NAMES` as :data:`NOT_SERVED`."""
    for name in PORT_NAMES:
        publish_port(session_dir, node_id, name, NOT_SERVED)


def publish_port(session_dir: str, node_id: str, name: str, port: int) -> None:
    """The port file ``name`` of ``node_id``, whole at once (the raylet polls for it:
    it never reads a half-written one)."""
    path = os.path.join(session_dir, f"{name}_{node_id}")
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w", encoding="ascii") as file:
        file.write(str(port))
    os.replace(partial, path)


REFUSAL = (
    b"the OLLM service's Ray head provides no runtime environments (its pipeline hosts need none)\n"
)


def refuse_runtime_environments(address: str) -> int:
    """Listen on ``address`` (port 0: any free one) for the raylet's requests of a
    runtime environment, on a thread of its own, and answer each with HTTP 501 and
    why (:data:`REFUSAL`); its port. Each request is logged on stderr (the
    raylet's ``runtime_env_agent.err``): a worker that asked for one does not start."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            connection, _ = listener.accept()
            with connection:
                connection.settimeout(5.0)
                try:
                    asked = connection.recv(4096).split(b"\r\n", 1)[0]
                    head = b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain\r\n"
                    length = b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(REFUSAL)
                    connection.sendall(head + length + REFUSAL)
                except OSError:
                    continue
            print(
                f"refused {asked.decode(errors='replace')}: {REFUSAL.decode()}",
                end="",
                file=sys.stderr,
                flush=True,
            )

    threading.Thread(target=serve, name="refuse-runtime-environments", daemon=True).start()
    return int(listener.getsockname()[1])


def wait_for_raylet(raylet_pid: int | None, *, poll_s: float = 1.0) -> None:
    """Return when the raylet ends: its pipe on stdin closes, or without that pipe,
    its process is gone (or this one has another parent)."""
    if os.environ.get(PIPE_CHECK, "").lower() in ("1", "true"):
        while os.read(0, 4096):
            pass
        return
    parent = os.getppid()
    while os.getppid() == parent and _alive(raylet_pid):
        time.sleep(poll_s)


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str]) -> int:
    given = options(argv)
    node_id, session_dir = given.get("node-id"), given.get("session-dir")
    if not node_id or not session_dir:
        print(
            "the service's raylet agent needs --node-id= and --session-dir= "
            "(it is started by the service's raylet, not by hand)",
            file=sys.stderr,
        )
        return 2
    if given.get(ROLE) == "runtime_env":
        port = refuse_runtime_environments(given.get("node-ip-address", "127.0.0.1"))
        publish_port(session_dir, node_id, RUNTIME_ENV_PORT_NAME, port)
    else:
        publish_ports(session_dir, node_id)
    raylet = os.environ.get("RAY_RAYLET_PID", "")
    wait_for_raylet(int(raylet) if raylet.isdigit() else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
