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
    """Create ``path`` with mode 0700, and every missing parent with mode 0700 too, and
    return it.

    ``Path.mkdir(parents=True, mode=...)`` gives the mode to the last folder only
    (the parents get the umask's), so ``sessions/.index`` would leave ``sessions/``
    readable by everyone. Folders that already exist keep their mode, except
    ``path`` itself, which is made 0700.
    """
    missing: list[Path] = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not folder.is_dir():
                raise
    try:
        if path.stat().st_mode & 0o777 != 0o700:
            path.chmod(0o700)
    except OSError:
        pass
    return path
