"""The runtime: where the service actors live, chosen in this one place.

Two runtimes give the coordinator the same thing, a :class:`Service` per
actor, called by the shell's method so that mypy checks every call and a
reader can follow it to the shell (``await service.call(Shell.method, ...)``):

- :class:`RayRuntime`: each actor its own Ray process (local, or on the
  cluster at ``ray_address``), restarted by Ray when it dies
  (``max_restarts``); ``--runtime ray``.
- :class:`InProcessRuntime`: the same shell classes as plain objects, their
  blocking methods run on a thread pool; for fast tests and tiny runs.

The default, the long-lived local service, is no runtime of the command: its
pipeline hosts run an :class:`InProcessRuntime` each, and the command is a thin
client of its socket (:mod:`ollm_cli.pipeline.service`).

Back-pressure: each service admits at most ``max_inflight`` calls at once;
further callers wait (``inflight`` and ``waiting`` are the inbox depths the
load harness reports).

Example::

    runtime = create_runtime(settings, workspace=Path.cwd(), kind="inprocess")
    await runtime.start()
    sid = await runtime.recording.call(RecordingShell.create_session, "llama3.2", "ollama")
    await runtime.shutdown()
"""

from __future__ import annotations

from ollm_cli.pipeline.runtime._cluster_probe import check_cluster
from ollm_cli.pipeline.runtime._factory import create_runtime
from ollm_cli.pipeline.runtime._inprocess import InProcessRuntime, LocalService
from ollm_cli.pipeline.runtime._ray import RayRuntime, RayService
from ollm_cli.pipeline.runtime._runtime import Runtime, RuntimeKind
from ollm_cli.pipeline.runtime._service import Service

__all__ = [
    "InProcessRuntime",
    "LocalService",
    "RayRuntime",
    "RayService",
    "Runtime",
    "RuntimeKind",
    "Service",
    "check_cluster",
    "create_runtime",
]
