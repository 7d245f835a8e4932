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


def private_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder only this user can reach, or ``None`` when it is: a
    real folder (not a symbolic link), owned by this user, that no one else may write
    or enter (group and others have no permission at all)."""
    import stat

    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder" if not stat.S_ISLNK(info.st_mode) else "is a symbolic link"
    if info.st_uid != os.getuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o077:
        return f"is open to other users (mode {info.st_mode & 0o777:o})"
    return None


def runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR`` when it is set and is this user's private folder (owned by
    the user, mode 0700, as the login manager makes it), else ``None``."""
    value = os.environ.get("XDG_RUNTIME_DIR")
    if not value or not os.path.isabs(value):
        return None
    path = Path(value)
    return path if private_dir_problem(path) is None else None
