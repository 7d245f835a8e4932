"""The Ray runtime: every shell a Ray actor in its own process (on this machine,
or on the cluster at ``ray_address``), restarted by Ray when it dies
(``max_restarts``); a dead actor's calls in flight become
:class:`~ollm_cli.pipeline.errors.ActorFailedError`.

Example::

    runtime = RayRuntime(settings, Path.cwd(), ray_address="10.0.0.5:6379")
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import sys
from pathlib import Path
from typing import Any

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.actors.tool_worker import ToolWorkerShell
from ollm_cli.base.atomic_file import write_atomic
from ollm_cli.config.paths import ensure_private_dir, ollm_home, ray_temp_dir
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ActorFailedError
from ollm_cli.pipeline.retry_policy import retrying
from ollm_cli.pipeline.runtime._cluster_probe import check_cluster
from ollm_cli.pipeline.runtime._runtime import Runtime, RuntimeKind, shells_of
from ollm_cli.pipeline.runtime._service import Service, ShellT


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

        try:
            async for attempt in retrying(on=RayActorError, timeout=timeout):
                with attempt:
                    await self.handle.ping.remote()
        except RayActorError:
            raise self._failed(TimeoutError("no answer after a restart")) from None

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
        loaded = sys.modules.get("ray")
        if loaded is None or not loaded.is_initialized():
            private = self._private_local_ray()  # before ray is imported: see there
            import ray

            # the runtime's loop runs in a thread: Ray's "not the main thread" notice is
            # expected, and would reach the terminal in Ray's words
            logging.getLogger("ray._private.worker").addFilter(_without_thread_notice)

            if self.ray_address:  # a refused ray.init retries for ~20 s: ask first
                check_cluster(self.ray_address)
            env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("OLLM_")}}
            ray.init(
                address=self.ray_address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=env if env["env_vars"] else None,
                **private,
            )
            self._started_ray = True
        limit = self.settings.runtime.max_inflight
        rt = self.settings.runtime
        made: dict[str, RayService[Any]] = {}
        for name, (cls, args) in shells_of(self.settings, self.workspace).items():
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
        # a killed actor loses what its telemetry has not sent yet; a start refused
        # before the actors were made (no cluster, say) has none to flush
        made = hasattr(self, "recording")
        flushes = [s.call(ShellBase.flush_telemetry) for s in self.services] if made else []
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
        to every user; every server on 127.0.0.1 with token authentication (Ray's
        own default binds every interface without one: anyone who reaches the
        machine could run code as this user); no metrics collection (its Prometheus
        endpoint would answer anyone on the machine). Nothing for a cluster's Ray
        (``rayAddress``). Ray reads the variables when it is imported: a process that
        imported it before cannot start a private one, and is refused."""
        if self.ray_address or os.environ.get("RAY_ADDRESS"):
            return {}
        private = private_ray_environment(ollm_home() / "ray")
        if "ray" in sys.modules and any(os.environ.get(k) != v for k, v in private.items()):
            raise RuntimeError(
                "ray was imported before the Ray runtime could make its local Ray private "
                "(loopback only, token authentication); start the runtime first, or start "
                "Ray yourself with ray.init() before it"
            )
        os.environ.update(private)
        folder, self._ray_folder = ray_temp_dir(ollm_home() / "ray")
        return {
            "_temp_dir": str(folder),
            "_node_ip_address": "127.0.0.1",
            "_system_config": {"enable_metrics_collection": False},
        }


def _without_thread_notice(record: logging.LogRecord) -> bool:
    return "SIGTERM handler is not set" not in record.getMessage()


def private_ray_environment(folder: Path) -> dict[str, str]:
    """The variables that keep a local Ray to this user: token authentication with
    a token kept in ``folder`` (0600 in a 0700 folder, made once per home), and
    every Ray server on 127.0.0.1 (Ray takes the node's address from the route to
    the internet unless told the node is alone)."""
    ensure_private_dir(folder)
    token = folder / "token"
    if not token.exists() or token.stat().st_size == 0:
        write_atomic(token, secrets.token_hex(32).encode())
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
    }


__all__ = ["RayRuntime", "RayService", "private_ray_environment"]
