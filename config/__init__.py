"""OLLM configuration: one pydantic model loaded from YAML files and ``OLLM_*`` variables.

The names below are imported when first used: a module of this package that
needs no pydantic (``paths``, ``layers``, ``discovery_defaults``,
``ignore_syntax``) is imported without the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.base.lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.config.loader import LoadedSettings, load_settings
    from ollm_cli.config.paths import ollm_home, user_config_path, workspace_config_path
    from ollm_cli.config.settings import OllmSettings

__all__ = [
    "LoadedSettings",
    "OllmSettings",
    "load_settings",
    "ollm_home",
    "user_config_path",
    "workspace_config_path",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "loader": ("LoadedSettings", "load_settings"),
        "paths": ("ollm_home", "user_config_path", "workspace_config_path"),
        "settings": ("OllmSettings",),
    },
)
