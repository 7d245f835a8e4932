"""Whether any layer of the configuration is there, decided without pydantic or YAML.

:func:`~ollm_cli.config.loader.load_settings` reads the layers (the user's file, the
workspace's file, ``OLLM_*`` variables, the standard variables other tools share)
and validates what they set; with none of them every setting is its default.
:func:`has_layers` says which case this is, by the same rules the loader
applies (the loader takes its early return from it), so that a command needing a
few defaults (``ollm files``) can skip importing the config model when nothing
could change them.

Example::

    if not has_layers(Path.cwd(), os.environ):
        settings = FILE_DISCOVERY_DEFAULTS    # what the model's defaults are
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ollm_cli.config.paths import user_config_path, workspace_config_path
from ollm_cli.config.standard_env import standard_env_values

ENV_PREFIX = "OLLM_"
NOT_CONFIG = frozenset({"OLLM_HOME", "OLLM_LOG_LEVEL", "OLLM_NO_RAY", "OLLM_TRUST_WORKSPACE"})
"""``OLLM_*`` variables that are not config keys (read where they are used)."""


def config_variables(env: Mapping[str, str]) -> list[str]:
    """The names of ``env`` the loader reads as ``OLLM_*`` config keys, sorted."""
    return sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in NOT_CONFIG)


def has_layers(
    workspace: Path | None, env: Mapping[str, str], *, user_file: Path | None = None
) -> bool:
    """Whether anything could set a value: a config file (the user's or the
    workspace's), an ``OLLM_*`` config variable, or a standard variable."""
    files = (user_file or user_config_path(), workspace_config_path(workspace))
    return (
        any(path.is_file() for path in files)
        or bool(config_variables(env))
        or bool(standard_env_values(env))
    )
