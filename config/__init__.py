"""OLLM configuration: one pydantic model loaded from YAML files and ``OLLM_*`` variables."""

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
