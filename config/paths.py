"""Where OLLM keeps its files: ``~/.ollm`` unless ``OLLM_HOME`` moves it, and whether
they are the user's own.

What the home holds is obeyed as the user's: ``config.yaml``'s hooks run,
``trusted-folders.json`` lets a workspace's hooks run, ``service/`` names the daemon a
command talks to. So the home, every entry in it and every folder OLLM makes or reuses
inside it must belong to the user and be writable by no one else
(:func:`check_home`, :func:`check_owned`, :func:`ensure_private_dir`). A symbolic
link is never taken on trust: it is judged by where it really leads, and by every
folder above that, so no one else can put something in its place. What is not safe
is refused with :class:`UnsafeHomeError`, naming the path, what was found and the
fix; nothing is changed in it.

Example::

    check_home()                      # raises UnsafeHomeError for a home of another user
    ensure_private_dir(ollm_home() / "sessions")
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ollm_cli.base.errors import UnsafeHomeError

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


def _user_name(uid: int) -> str | None:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _owner(uid: int) -> str:
    name = _user_name(uid)
    return f"{name} (uid {uid})" if name else f"uid {uid}"


def _others_writing(mode: int) -> str | None:
    """Who besides the owner may write a file of ``mode``, or ``None``."""
    group, others = bool(mode & stat.S_IWGRP), bool(mode & stat.S_IWOTH)
    if group and others:
        return "its group and every other user"
    if group:
        return "its group"
    return "every other user" if others else None


_ELSEWHERE = "or set OLLM_HOME to a folder of your own"


def _write_bits_that_count(folder: Path) -> int:
    """The write bits that matter for an entry of ``folder``: its group's when the group
    may enter ``folder``, others' when they may. In a folder no one else may enter
    (0700, as OLLM makes its home) no one else can write anything, whatever the modes
    inside say (Ray opens the folder it is given to everyone each time it starts)."""
    try:
        mode = os.stat(folder).st_mode
    except OSError:
        return stat.S_IWGRP | stat.S_IWOTH
    bits = stat.S_IWGRP if mode & stat.S_IXGRP else 0
    return bits | (stat.S_IWOTH if mode & stat.S_IXOTH else 0)


def _refusal(
    shown: str, path: Path, info: os.stat_result, *, folder: bool
) -> UnsafeHomeError | None:
    """Why ``path`` (shown as ``shown``; ``info`` is its own ``lstat``, or the ``stat`` of
    what a link leads to) is not the user's alone, as the error to raise; ``None`` when
    it is."""
    me = os.getuid()
    recursive = "-R " if folder else ""
    if info.st_uid != me:
        return UnsafeHomeError(
            f"{shown} belongs to {_owner(info.st_uid)}, not to you, {_owner(me)}: OLLM "
            f"would obey what its owner puts there (hooks run as you)",
            hint=f"if it is yours, `chown {recursive}{_user_name(me) or me} {path}` (as root); "
            f"otherwise move it away {_ELSEWHERE}",
        )
    writers = _others_writing(info.st_mode & _write_bits_that_count(path.parent))
    if writers is not None:
        return UnsafeHomeError(
            f"{shown} can be written by {writers} (mode {stat.S_IMODE(info.st_mode):04o}, "
            f"in {path.parent}, which they may enter): they could plant what OLLM then "
            f"obeys as yours (hooks run as you)",
            hint=f"`chmod {recursive}go-w {path}` once you have checked what is in it, "
            f"{_ELSEWHERE}",
        )
    return None


def _above_problem(real: Path, shown: str) -> UnsafeHomeError | None:
    """Whether someone else could put another folder or file in the place of ``real`` (a
    real path, no link in it): a folder above it that is neither the user's nor root's,
    or that others may write without the sticky bit (``/tmp``'s, which keeps each
    entry to its owner)."""
    me = os.getuid()
    for parent in real.parents:
        try:
            info = os.stat(parent)
        except OSError as exc:
            return UnsafeHomeError(
                f"cannot check {parent}, above {shown}: {exc.strerror}",
                hint=f"check its permissions, {_ELSEWHERE}",
            )
        if info.st_uid not in (0, me):
            return UnsafeHomeError(
                f"{shown} is inside {parent}, which belongs to {_owner(info.st_uid)}: they "
                f"could put a folder of theirs in its place",
                hint=f"move it to a folder of your own, {_ELSEWHERE}",
            )
        writers = _others_writing(info.st_mode & _write_bits_that_count(parent.parent))
        if writers is not None and not info.st_mode & stat.S_ISVTX:
            return UnsafeHomeError(
                f"{shown} is inside {parent}, which {writers} can write (mode "
                f"{stat.S_IMODE(info.st_mode):04o}): they could put a folder of theirs in its "
                f"place",
                hint=f"`chmod go-w {parent}` (or `chmod +t`, as /tmp is), {_ELSEWHERE}",
            )
    return None


def check_owned(path: Path, *, folder: bool) -> None:
    """Raise :class:`UnsafeHomeError` unless ``path`` (when it exists) is the user's
    alone: owned by this uid, and written by no one else (its mode gives no write to
    its group or to others who may enter the folder holding it; ``folder``: the fix
    named is for a whole folder). A symbolic link is never taken on trust: it is
    judged by the real folder or file it leads to, and by every folder above that one
    (each the user's or root's, written by no one else unless sticky, as ``/tmp``),
    so that no one else can put something in its place. What cannot be looked at
    (nothing there, a file where a folder should be above it, a dangling link) is left
    to whoever uses it.

    >>> check_owned(Path("/nonexistent/config.yaml"), folder=False)   # nothing there
    """
    try:
        info = os.lstat(path)
    except OSError:  # nothing there (or a file where a folder is expected above it):
        return  # the caller's own use of the path meets the same error, as ever
    shown = str(path)
    if stat.S_ISLNK(info.st_mode):
        real = Path(os.path.realpath(path))
        try:
            info = os.stat(real)
        except OSError:
            return
        shown = f"{path} (a link to {real})"
        above = _above_problem(real, shown)
        if above is not None:
            raise above
        path = real
    refusal = _refusal(shown, path, info, folder=folder)
    if refusal is not None:
        raise refusal


def check_home(home: Path | None = None) -> None:
    """Raise :class:`UnsafeHomeError` unless the OLLM home (``home``, else
    :func:`ollm_home`), the folders above it and every entry directly in it are safe
    (see :func:`check_owned`); nothing to check while the home does not exist. Entries
    deeper down are as safe as the folders holding them: no one else can write those.
    """
    home = ollm_home() if home is None else home
    real = Path(os.path.realpath(home))
    if not os.path.lexists(home):
        return
    check_owned(home, folder=True)
    above = _above_problem(real, str(home))
    if above is not None:
        raise above
    try:
        entries = list(os.scandir(real))
    except OSError as exc:
        raise UnsafeHomeError(
            f"cannot read the OLLM home {home}: {exc.strerror}",
            hint=f"check its permissions, {_ELSEWHERE}",
        ) from None
    for entry in entries:
        try:
            is_folder = entry.is_dir()  # of what a link leads to
        except OSError:
            is_folder = False
        check_owned(Path(entry.path), folder=is_folder)


def _within_home(path: Path) -> list[Path]:
    """``path`` and, when it is inside the OLLM home, every folder from it up to the home."""
    home = os.path.abspath(ollm_home())
    target = Path(os.path.abspath(path))
    chain = [target]
    if target.is_relative_to(home):
        chain.extend(parent for parent in target.parents if parent.is_relative_to(home))
    return chain


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` with mode 0700, and every missing parent with mode 0700 too, and
    return it.

    ``Path.mkdir(parents=True, mode=...)`` gives the mode to the last folder only
    (the parents get the umask's), so ``sessions/.index`` would leave ``sessions/``
    readable by everyone. Folders that already exist keep their mode, except
    ``path`` itself, which is made 0700. An existing ``path``, and inside the OLLM
    home every existing folder between it and the home, must be the user's alone
    (:func:`check_owned`): one of another user, or open to others' writes, is
    refused with :class:`UnsafeHomeError`, never made 0700 under its owner.
    """
    for folder in _within_home(path):
        check_owned(folder, folder=True)
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
