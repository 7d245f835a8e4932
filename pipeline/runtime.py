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

import asyncio
import contextlib
import logging
import os
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.context import ContextShell
from ollm_cli.actors.loop_detection import LoopDetectionShell
from ollm_cli.actors.provider import ProviderShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.sanitizer import SanitizerShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.actors.tool_worker import ToolWorkerShell
from ollm_cli.config.paths import ollm_home, ray_temp_dir
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ActorFailedError, OllmError, UsageError
from ollm_cli.pipeline.telemetry import trace_carrier

logger = logging.getLogger(__name__)

RuntimeKind = Literal["service", "ray", "inprocess"]
ShellT = TypeVar("ShellT", bound=ShellBase)
P = ParamSpec("P")
R = TypeVar("R")


class Service(ABC, Generic[ShellT]):
    """A handle to one service actor, with bounded in-flight calls.

    ``await service.call(RecordingShell.get_session, sid)``: the method is
    the shell's own, so its arguments and result are checked; it runs on the
    actor under its name (an override in the actor's class is the one run).
    """

    def __init__(self, name: str, max_inflight: int) -> None:
        self.name = name
        self.max_inflight = max_inflight
        self.inflight = 0
        self.waiting = 0
        self.calls = 0
        self._semaphore: asyncio.Semaphore | None = None

    def _sem(self) -> asyncio.Semaphore:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_inflight)
        return self._semaphore

    async def call(
        self,
        method: Callable[Concatenate[ShellT, P], R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Call ``method`` on the actor and wait for its result."""
        result: R = await self._enter(method.__name__, args, kwargs)
        return result

    async def _enter(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.waiting += 1
        async with self._sem():
            self.waiting -= 1
            self.inflight += 1
            self.calls += 1
            if (carrier := trace_carrier()) is not None:  # the actor's span joins the trace
                method, args = "traced", (carrier, method, *args)
            try:
                return await self._call(method, args, kwargs)
            finally:
                self.inflight -= 1

    @abstractmethod
    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    async def wait_alive(self, timeout: float = 60.0) -> None:
        """Wait until the actor answers (after a restart), up to ``timeout`` seconds."""
        await self.call(ShellBase.ping)

    @abstractmethod
    async def kill(self) -> None:
        """Kill the actor's process (Ray restarts it); used by fault-injection tests."""

    @abstractmethod
    async def memory_rss(self) -> int:
        """Resident memory of the actor's process in bytes."""


class LocalService(Service[ShellT]):
    """A shell object in this process; blocking methods run on the runtime's pool."""

    def __init__(self, name: str, obj: ShellT, pool: ThreadPoolExecutor, max_inflight: int) -> None:
        super().__init__(name, max_inflight)
        self.obj = obj
        self._pool = pool

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        function = getattr(self.obj, method)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: function(*args, **kwargs))

    async def kill(self) -> None:
        raise OllmError(f"the in-process {self.name} service cannot be killed")

    async def memory_rss(self) -> int:
        import psutil

        return int(psutil.Process(os.getpid()).memory_info().rss)


class RayService(Service[ShellT]):
    """A Ray actor; a dead actor's in-flight calls become :class:`ActorFailedError`."""

    def __init__(self, name: str, handle: Any, max_inflight: int) -> None:
        super().__init__(name, max_inflight)
        self.handle = handle

    def _failed(self, error: BaseException) -> ActorFailedError:
        return ActorFailedError(
            f"the {self.name} service stopped while serving this turn "
            f"({type(error).__name__}); Ray is restarting it",
            hint="everything recorded before this point is saved; send your message again",
        )

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except RayTaskError as exc:
            raise _unwrap(exc) from None
        except RayActorError as exc:
            raise self._failed(exc) from None

    async def wait_alive(self, timeout: float = 60.0) -> None:
        """Ping until the actor answers: a restarting actor is unavailable for a while."""
        from ray.exceptions import RayActorError

        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                await self.handle.ping.remote()
                return
            except RayActorError:
                if time.monotonic() >= deadline:
                    raise self._failed(TimeoutError("no answer after a restart")) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def kill(self) -> None:
        import ray

        ray.kill(self.handle, no_restart=False)

    async def memory_rss(self) -> int:
        return await self.call(ShellBase.memory_rss)


def _unwrap(error: BaseException) -> BaseException:
    """The user-facing exception inside a RayTaskError (our OllmErrors survive pickling)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    return error


class Runtime(ABC):
    """The set of service actors the coordinator talks to."""

    kind: RuntimeKind
    depth_poll_s: float = 0.02
    """How often the load harness asks for :meth:`inbox_depths`."""

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        self.settings = settings
        self.workspace = workspace
        self.recording: Service[RecordingShell]
        self.context: Service[ContextShell]
        self.loop_detection: Service[LoopDetectionShell]
        self.sanitizer: Service[SanitizerShell]
        self.compression: list[Service[CompressionShell]] = []
        self.provider: Service[ProviderShell]
        self.tool_workers: list[Service[ToolWorkerShell]] = []

    @property
    def services(self) -> list[Service[Any]]:
        """Every service, for inbox-depth and memory reports."""
        return [
            self.recording,
            self.context,
            self.loop_detection,
            self.sanitizer,
            self.provider,
            *self.compression,
            *self.tool_workers,
        ]

    async def inbox_depths(self) -> dict[str, int]:
        """Calls in flight or waiting at each service (the load harness's inbox depths)."""
        return {s.name: s.inflight + s.waiting for s in self.services}

    def tool_worker(self) -> Service[ToolWorkerShell]:
        """The least busy tool worker."""
        return min(self.tool_workers, key=lambda s: s.inflight + s.waiting)

    def compressor(self) -> Service[CompressionShell]:
        """The least busy compression actor."""
        return min(self.compression, key=lambda s: s.inflight + s.waiting)

    @abstractmethod
    async def start(self) -> None:
        """Create the actors."""

    @abstractmethod
    async def shutdown(self) -> None:
        """Close the services (saving every open session) and stop the actors."""

    async def _close_services(self) -> None:
        # after a failed start some services may not exist: close those that do
        started = [getattr(self, name, None) for name in ("recording", "provider")]
        for service in [s for s in (*started, *self.compression) if s is not None]:
            try:
                await service.call(ShellBase.close)
            except Exception as exc:  # closing is best effort; the store recovers on open
                logger.warning("closing the %s service failed: %s", service.name, exc)


def _shells(settings: OllmSettings, workspace: Path) -> dict[str, tuple[type, tuple[Any, ...]]]:
    return {
        "recording": (RecordingShell, (settings,)),
        "context": (ContextShell, (settings, workspace)),
        "loop_detection": (LoopDetectionShell, (settings,)),
        "sanitizer": (SanitizerShell, (settings,)),
        "provider": (ProviderShell, (settings,)),
    }


class InProcessRuntime(Runtime):
    """Every shell as a plain object in this process."""

    kind: RuntimeKind = "inprocess"

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        super().__init__(settings, workspace)
        self._pool = ThreadPoolExecutor(
            max_workers=max(64, settings.runtime.max_inflight), thread_name_prefix="ollm"
        )

    async def start(self) -> None:
        limit = self.settings.runtime.max_inflight
        made = {
            name: LocalService(name, cls(*args), self._pool, limit)
            for name, (cls, args) in _shells(self.settings, self.workspace).items()
        }
        self.recording = made["recording"]
        self.context = made["context"]
        self.loop_detection = made["loop_detection"]
        self.sanitizer = made["sanitizer"]
        self.provider = made["provider"]
        self.compression = [
            LocalService(f"compression-{i}", CompressionShell(self.settings), self._pool, limit)
            for i in range(self.settings.runtime.compression_actors)
        ]
        self.tool_workers = [
            LocalService(
                f"tool-worker-{i}",
                ToolWorkerShell(self.settings, self.workspace),
                self._pool,
                limit,
            )
            for i in range(self.settings.runtime.tool_workers)
        ]

    async def shutdown(self) -> None:
        await self._close_services()
        self._pool.shutdown(wait=False, cancel_futures=True)


class RayRuntime(Runtime):
    """Every shell as a Ray actor in its own process."""

    kind: RuntimeKind = "ray"

    def __init__(
        self, settings: OllmSettings, workspace: Path, ray_address: str | None = None
    ) -> None:
        super().__init__(settings, workspace)
        self.ray_address = ray_address or settings.runtime.ray_address
        self._started_ray = False
        self._handles: list[Any] = []
        self._ray_folder: Path | None = None

    def _actor(self, cls: type, args: tuple[Any, ...], *, cpus: float, concurrency: int) -> Any:
        import ray

        remote_cls: Any = ray.remote(cls)
        handle = remote_cls.options(
            num_cpus=cpus,
            max_restarts=self.settings.runtime.max_restarts,
            max_task_retries=0,
            max_concurrency=concurrency,
        ).remote(*args)
        self._handles.append(handle)
        return handle

    async def start(self) -> None:
        import ray

        if not ray.is_initialized():
            env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("OLLM_")}}
            ray.init(
                address=self.ray_address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=env if env["env_vars"] else None,
                **self._private_local_ray(),
            )
            self._started_ray = True
        limit = self.settings.runtime.max_inflight
        rt = self.settings.runtime
        made: dict[str, RayService[Any]] = {}
        for name, (cls, args) in _shells(self.settings, self.workspace).items():
            # recording waits on fsyncs and the provider on the model: many calls at
            # once; the CPU-only services answer fastest one call at a time
            concurrency = 256 if name in {"recording", "provider"} else 1
            made[name] = RayService(
                name, self._actor(cls, args, cpus=0, concurrency=concurrency), limit
            )
        self.recording = made["recording"]
        self.context = made["context"]
        self.loop_detection = made["loop_detection"]
        self.sanitizer = made["sanitizer"]
        self.provider = made["provider"]
        self.compression = [
            RayService(
                f"compression-{i}",
                self._actor(
                    CompressionShell, (self.settings,), cpus=rt.compression_cpus, concurrency=4
                ),
                limit,
            )
            for i in range(rt.compression_actors)
        ]
        self.tool_workers = [
            RayService(
                f"tool-worker-{i}",
                self._actor(
                    ToolWorkerShell,
                    (self.settings, self.workspace),
                    cpus=rt.tool_worker_cpus,
                    concurrency=4,
                ),
                limit,
            )
            for i in range(rt.tool_workers)
        ]
        await asyncio.gather(*(s.call(ShellBase.ping) for s in self.services))

    async def shutdown(self) -> None:
        import ray

        await self._close_services()
        # a killed actor loses what its telemetry has not sent yet
        flushes = [s.call(ShellBase.flush_telemetry) for s in self.services]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*flushes, return_exceptions=True), 10)
        for handle in self._handles:
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)
        self._handles.clear()
        if self._started_ray:
            ray.shutdown()
        if self._ray_folder is not None:
            shutil.rmtree(self._ray_folder, ignore_errors=True)
            self._ray_folder = None

    def _private_local_ray(self) -> dict[str, Any]:
        """What a Ray this command starts for itself needs so nothing of it is shared:
        its files in a private folder (``OLLM_HOME/ray``, or one of
        :func:`~ollm_cli.config.paths.ray_temp_dir`'s), never Ray's ``/tmp/ray``, open
        to every user; no metrics collection (its Prometheus endpoint would answer
        anyone on the machine). Nothing for a cluster's Ray (``rayAddress``)."""
        if self.ray_address or os.environ.get("RAY_ADDRESS"):
            return {}
        folder, self._ray_folder = ray_temp_dir(ollm_home() / "ray")
        return {"_temp_dir": str(folder), "_system_config": {"enable_metrics_collection": False}}


def create_runtime(
    settings: OllmSettings,
    workspace: Path,
    *,
    kind: RuntimeKind | None = None,
    ray_address: str | None = None,
) -> Runtime:
    """The runtime named by ``kind`` (default: ``settings.runtime.kind``): Ray actors
    of this command (or of the cluster at ``ray_address``), or plain objects.
    The long-lived local service is reached through its socket, not a runtime
    (:func:`ollm_cli.pipeline.service.open_conversations`)."""
    chosen = kind or settings.runtime.kind
    if chosen == "inprocess":
        return InProcessRuntime(settings, workspace)
    if chosen == "service" and not (ray_address or settings.runtime.ray_address):
        raise UsageError(
            "the service runtime is the local service's socket, not a runtime of this process",
            hint="use ollm_cli.pipeline.service.open_conversations (or RemoteLoad)",
        )
    return RayRuntime(settings, workspace, ray_address=ray_address)
