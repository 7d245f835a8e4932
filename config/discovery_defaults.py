"""The defaults of ``services.fileDiscovery``, as plain values.

:class:`~ollm_cli.config.settings.FileDiscoverySettings` takes its defaults from
here, so these are what the config model says when nothing sets them; ``ollm
files`` uses them as they are when no config file or variable exists
(:func:`~ollm_cli.config.layers.has_layers`), without importing the model.

Example::

    FILE_DISCOVERY_DEFAULTS.max_depth      # 64
"""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_BUILTIN_IGNORES: tuple[str, ...] = (
    "node_modules",
    ".git",
    "dist",
    "build",
    ".next",
    ".cache",
)


class FileDiscoveryDefaults(NamedTuple):
    """Each ``services.fileDiscovery`` key at its default (the model's field docs say
    what each means)."""

    max_depth: int = 64
    follow_symlinks: bool = False
    builtin_ignores: tuple[str, ...] = DEFAULT_BUILTIN_IGNORES
    max_files: int = 100_000
    scan_time_s: float = 10.0


FILE_DISCOVERY_DEFAULTS = FileDiscoveryDefaults()
