"""Where OLLM keeps its files: ``~/.ollm`` unless ``OLLM_HOME`` moves it."""

from __future__ import annotations

import os
from pathlib import Path

USER_CONFIG_NAME = "config.yaml"
WORKSPACE_CONFIG = Path(".ollm") / "config.yaml"


def ollm_home() -> Path:
    """The OLLM home folder (``$OLLM_HOME`` or ``~/.ollm``), not created here."""
    override = os.environ.get("OLLM_HOME")
    return Path(override).expanduser() if override else Path.home() / ".ollm"


def user_config_path() -> Path:
    """The user's config file: ``~/.ollm/config.yaml``."""
    return ollm_home() / USER_CONFIG_NAME


def workspace_config_path(workspace: Path | None = None) -> Path:
    """The workspace config file: ``.ollm/config.yaml`` under the workspace root."""
    return (workspace or Path.cwd()) / WORKSPACE_CONFIG


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700 and return it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if path.stat().st_mode & 0o777 != 0o700:
            path.chmod(0o700)
    except OSError:
        pass
    return path
