"""The dashboard agent of the service's own Ray head: what its raylet needs of one.

A raylet starts a dashboard agent and waits, before it registers its node, for the
agent to publish three ports in its session folder: the metrics agent's, the
metrics export's and the agent's HTTP listener's. Each is a file named
``<port name>_<node id>`` holding the port in decimal, ``-1`` for a service the
agent does not run. The raylet then watches the agent's process (and ends if it
ends); the agent watches the raylet: it ends when the raylet's pipe on its stdin
closes or, without that pipe, when the raylet's process is gone.

Ray's own agent (``ray/dashboard/agent.py``) imports Ray and then every module
of its dashboard (jobs, logs, metrics, events, health) before it publishes the
ports: 1.3 s of CPU, and about 3 s of a cold start on a busy 2-core machine
spent by the raylet waiting. The service uses none of them: no dashboard, no
job submission, no metrics, no state API (the minimal agent Ray gives a
service without them publishes ``-1`` for all three ports as well). This agent
publishes the same ``-1`` ports at once, serves nothing, and imports only
``os`` and ``sys``: it runs as ``python -I -S <this file>``, outside the
package, the raylet's arguments after it.

Example (what the raylet runs)::

    python -I -S .../ray_node/_agent.py .../agent.py --node-id=<hex> --session-dir=<dir> ...
"""

from __future__ import annotations

import os
import sys
import time

PORT_NAMES = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port")
"""The ports a raylet waits for from its dashboard agent (``ray._raylet``'s
``METRICS_AGENT_PORT_NAME``, ``METRICS_EXPORT_PORT_NAME`` and
``DASHBOARD_AGENT_LISTEN_PORT_NAME``)."""

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
    """Each of :data:`PORT_NAMES` as :data:`NOT_SERVED`, each file whole at once (the
    raylet polls for them: it never reads a half-written one)."""
    for name in PORT_NAMES:
        path = os.path.join(session_dir, f"{name}_{node_id}")
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "w", encoding="ascii") as file:
            file.write(str(NOT_SERVED))
        os.replace(partial, path)


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
            "the service's dashboard agent needs --node-id= and --session-dir= "
            "(it is started by the service's raylet, not by hand)",
            file=sys.stderr,
        )
        return 2
    publish_ports(session_dir, node_id)
    raylet = os.environ.get("RAY_RAYLET_PID", "")
    wait_for_raylet(int(raylet) if raylet.isdigit() else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
