"""Settings shared by every command, loaded once per invocation."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ollm_cli.config.loader import LoadedSettings, load_settings

_trusted_for_run: list[bool] = []


@lru_cache(maxsize=8)
def _load(workspace: Path) -> LoadedSettings:
    return load_settings(workspace, trusted=True if _trusted_for_run else None)


def trust_for_this_run() -> None:
    """``--trust-workspace``: the workspace's config counts as trusted until the command ends."""
    _trusted_for_run.append(True)
    _load.cache_clear()


def loaded_settings(workspace: Path | None = None) -> LoadedSettings:
    """The effective settings for ``workspace`` (the current folder by default)."""
    return _load((workspace or Path.cwd()).resolve())


def reset() -> None:
    """Forget loaded settings (tests change the environment between invocations)."""
    _load.cache_clear()
    _trusted_for_run.clear()
