"""Extensions: installed packages that add context, tools and hooks to OLLM.

A package declares an entry point in the ``ollm.extensions`` group whose object
is a function taking an :class:`ExtensionAPI`::

    # pyproject.toml of the extension
    [project.entry-points."ollm.extensions"]
    jira = "ollm_jira:register"

    # ollm_jira.py
    def register(api):
        api.add_context("jira", "Tickets are at https://jira.example", priority=60)
        api.add_hook("session:start", "jira-sync --quiet")

A broken extension (import error, exception in ``register``, bad values) is
reported in :attr:`LoadedExtensions.infos` and skipped; it never stops OLLM.
``ollm extensions list`` shows what was loaded.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ollm_cli.config.settings import HookSettings
from ollm_cli.pipeline.environment import redact

logger = logging.getLogger(__name__)

GROUP = "ollm.extensions"


class ExtensionContext(BaseModel):
    """A context entry contributed by an extension (source ``extension``)."""

    key: str = Field(min_length=1)
    content: str
    priority: int = 40


class ExtensionInfo(BaseModel):
    """What ``ollm extensions list`` shows for one entry point."""

    name: str
    target: str
    distribution: str | None = None
    status: Literal["loaded", "failed", "untrusted"]
    error: str | None = None
    context_keys: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)


class ExtensionAPI:
    """What an extension's ``register`` function may call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.context: list[ExtensionContext] = []
        self.tools: list[Any] = []
        self.hooks: list[HookSettings] = []

    def add_context(self, key: str, content: str, priority: int = 40) -> None:
        """Add a context entry to every conversation's system prompt."""
        self.context.append(
            ExtensionContext(key=f"{self.name}:{key}", content=content, priority=priority)
        )

    def add_tool(self, tool: Any) -> None:
        """Offer a tool to the model (an object following ``ollm_cli.pipeline.tools.Tool``)."""
        for attribute in ("name", "json_schema", "run"):
            if not hasattr(tool, attribute):
                raise TypeError(f"a tool needs `{attribute}`")
        self.tools.append(tool)

    def add_hook(
        self, event: str, command: str, *, timeout_s: float = 10.0, priority: int = 50
    ) -> None:
        """Run ``command`` on ``event`` with the event as JSON on stdin (like config hooks)."""
        self.hooks.append(
            HookSettings.model_validate(
                {"event": event, "command": command, "timeoutS": timeout_s, "priority": priority}
            )
        )


class LoadedExtensions(BaseModel):
    """Everything the installed extensions contributed."""

    model_config = {"arbitrary_types_allowed": True}

    infos: list[ExtensionInfo] = Field(default_factory=list)
    context_entries: list[ExtensionContext] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)
    hooks: list[HookSettings] = Field(default_factory=list)


def _inside_untrusted_workspace(entry: EntryPoint, workspace: Path) -> bool:
    """Whether ``entry`` is installed inside ``workspace`` (a ``*.dist-info`` in the
    repository, found because the folder is on ``sys.path``) and that folder is not trusted."""
    if entry.dist is None:
        return False
    try:
        location = Path(str(entry.dist.locate_file(""))).resolve()
    except (OSError, NotImplementedError, TypeError):
        return False
    root = workspace.resolve()
    if not location.is_relative_to(root):
        return False
    from ollm_cli.config.trust import is_trusted

    return not is_trusted(root)


def _load_one(entry: EntryPoint, loaded: LoadedExtensions, workspace: Path) -> None:
    distribution = entry.dist.name if entry.dist is not None else None
    if _inside_untrusted_workspace(entry, workspace):
        logger.warning(
            "extension %s is installed inside the untrusted folder %s and is skipped; "
            "run `ollm trust %s` if you trust it",
            entry.name,
            workspace,
            workspace,
        )
        loaded.infos.append(
            ExtensionInfo(
                name=entry.name,
                target=entry.value,
                distribution=distribution,
                status="untrusted",
                error="installed inside an untrusted workspace",
            )
        )
        return
    api = ExtensionAPI(entry.name)
    try:
        register = entry.load()
        if not callable(register):
            raise TypeError(f"{entry.value} is not a function taking the extension API")
        register(api)
    except (Exception, SystemExit) as error:
        message = redact(f"{type(error).__name__}: {error}")
        if isinstance(error, ValidationError):
            message = f"invalid value: {error.errors()[0]['msg']}"
        logger.warning("extension %s failed to load and is skipped: %s", entry.name, message)
        loaded.infos.append(
            ExtensionInfo(
                name=entry.name,
                target=entry.value,
                distribution=distribution,
                status="failed",
                error=message,
            )
        )
        return
    loaded.context_entries.extend(api.context)
    loaded.tools.extend(api.tools)
    loaded.hooks.extend(api.hooks)
    loaded.infos.append(
        ExtensionInfo(
            name=entry.name,
            target=entry.value,
            distribution=distribution,
            status="loaded",
            context_keys=[c.key for c in api.context],
            tools=[str(t.name) for t in api.tools],
            hooks=[h.event for h in api.hooks],
        )
    )


class _EntryPointScan:
    """The entry points of a group, found once per state of the folders they come from.

    ``importlib.metadata.entry_points()`` reads the metadata of every installed
    distribution (about 10 ms here), and the pipeline asks at every conversation
    (its hooks) and every shell (context, tools). A scan is kept with what it
    depends on: each folder of ``sys.path`` and its modification time. Installing
    or removing a distribution adds or removes its ``*.dist-info`` folder, which
    changes its folder's time; another ``sys.path`` (or current folder, for
    ``''``) is another key. Either scans again. A folder changed within
    :data:`RECENT_NS` of a scan could change again unseen (its time would not
    move: file systems keep times in coarse ticks), so that scan is not kept.
    """

    RECENT_NS = 2_000_000_000

    def __init__(self, folders: Callable[[], list[str]] = lambda: sys.path) -> None:
        self._folders = folders
        self._found: dict[str, tuple[tuple[tuple[str, int], ...], list[EntryPoint]]] = {}
        self._lock = threading.Lock()

    def _state(self) -> tuple[tuple[str, int], ...]:
        state = []
        for entry in self._folders():
            folder = os.path.abspath(entry or os.curdir)
            try:
                state.append((folder, os.stat(folder).st_mtime_ns))
            except OSError:
                state.append((folder, -1))
        return tuple(state)

    def __call__(self, group: str) -> list[EntryPoint]:
        state = self._state()
        with self._lock:
            kept = self._found.get(group)
        if kept is not None and kept[0] == state:
            return kept[1]
        started = time.time_ns()
        found = sorted(entry_points(group=group), key=lambda e: e.name)
        if all(mtime < started - self.RECENT_NS for _, mtime in state):
            with self._lock:
                self._found[group] = (state, found)
        return found


_scan = _EntryPointScan()


def load_extensions(group: str = GROUP, *, workspace: Path | None = None) -> LoadedExtensions:
    """Load every extension installed in this Python environment.

    One installed inside the workspace is loaded only when that folder is
    trusted: a repository must not bring code that runs because the folder
    happens to be on ``sys.path``. The pipeline passes the conversation's
    workspace (the service's own current folder is not it); the current folder
    is the default for the commands that run in the user's folder.
    """
    loaded = LoadedExtensions()
    root = workspace or Path.cwd()
    for entry in _scan(group):
        _load_one(entry, loaded, root)
    return loaded
