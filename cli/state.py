"""Settings shared by every command, loaded once per invocation."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ollm_cli.config.loader import LoadedSettings, load_settings


@lru_cache(maxsize=8)
def _load(workspace: Path) -> LoadedSettings:
    return load_settings(workspace)


def loaded_settings(workspace: Path | None = None) -> LoadedSettings:
    """The effective settings for ``workspace`` (the current folder by default)."""
    return _load((workspace or Path.cwd()).resolve())


def reset() -> None:
    """Forget loaded settings (tests change the environment between invocations)."""
    _load.cache_clear()
