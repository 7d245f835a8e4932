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


RAY_TEMP_MAX_CHARS = 40
"""The longest folder Ray's files may go in: its sockets are
``<folder>/session_<date>_<time>_<microseconds>_<pid>/sockets/plasma_store``
(about 64 characters more), and a Unix socket's path holds at most 107 bytes."""


def ray_temp_dir(preferred: Path) -> tuple[Path, Path | None]:
    """A folder for a Ray instance's files (its sockets, logs, spilled objects) that
    only this user can reach, short enough for Ray's socket paths, inside a folder
    that is the user's alone too (Ray opens the folders it makes to everyone):

    - ``preferred`` when its path is short enough (it is inside OLLM_HOME);
    - else ``$XDG_RUNTIME_DIR/ollm-<digest of preferred>`` when that folder is private;
    - else ``ray`` in a new folder of random name in the temp folder
      (``/tmp/ollm-ray-XXXXXXXX/ray``), which the caller removes when Ray stops
      (the second value names it; ``None`` otherwise).

    Never a fixed name in a shared folder, as Ray's own ``/tmp/ray`` is. Raises
    :class:`PermissionError` when the folder or its parent is not the user's own,
    or is open to others.
    """
    import hashlib
    import tempfile

    folder: Path | None = None
    if len(str(preferred)) <= RAY_TEMP_MAX_CHARS:
        folder = preferred
    else:
        runtime = runtime_dir()
        digest = hashlib.sha256(str(preferred).encode("utf-8", "surrogatepass")).hexdigest()
        if runtime is not None and len(str(runtime)) + 18 <= RAY_TEMP_MAX_CHARS:
            folder = runtime / f"ollm-{digest[:12]}"
    removable: Path | None = None
    if folder is None:
        removable = Path(tempfile.mkdtemp(prefix="ollm-ray-", dir=_short_temp_root()))
        folder = removable / "ray"
    if not os.path.islink(folder):
        ensure_private_dir(folder)  # inside the user's own folders: made 0700 again
    for checked in (folder.parent, folder):
        problem = private_dir_problem(checked)
        if problem is not None:
            raise PermissionError(f"the folder for Ray's files {checked} {problem}")
    return folder, removable


def _short_temp_root() -> str:
    import tempfile

    root = tempfile.gettempdir()
    return root if len(root) + 22 <= RAY_TEMP_MAX_CHARS else "/tmp"
