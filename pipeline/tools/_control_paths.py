"""The workspace's control paths: what OLLM or git later runs or loads as configuration.

A tool command runs in the sandbox, but what it leaves in the workspace is read
later on the host, outside any sandbox: a ``.ollm/config.yaml`` with ``hooks``
runs its commands at the next ``ollm run`` in that folder (or in any folder
below a trusted one), a ``.git/hooks/pre-commit`` or a ``.git/config`` with
``core.fsmonitor`` runs at the next ``git status``. So inside the sandbox these
paths can be neither written nor created:

- ``.ollm`` and ``.git`` (folder, gitfile or symlink), at any depth of the
  workspace (:data:`CONTROL_NAMES`): each that exists is bound read-only; an
  absent ``.ollm`` or ``.git`` at the top of the workspace is covered by an
  empty read-only folder for the time of the run (git skips an empty ``.git``),
  removed afterwards; one a command creates deeper is removed after the run and
  the model is told;
- the git directory a ``.git`` file or symlink points to, when it is inside
  the workspace, and the hooks folder its ``core.hooksPath`` names (Husky's
  ``.husky``), created empty and read-only when absent; the same for the
  repository the workspace itself is inside;
- a folder that a command turns into a bare git repository (``HEAD``,
  ``objects/``, ``refs/``: git reads its ``config`` when run there): its
  ``HEAD`` is removed after the run;
- the Python environment OLLM runs from (``sys.prefix``) and OLLM's own
  package, when they are inside the workspace.

The run holds a shared ``flock`` on the workspace folder; the last run to
finish (the one that gets it exclusively) removes the empty covers (marked with
the ``user.ollm.cover`` extended attribute where the file system keeps one), so
that two concurrent runs never unmount each other's cover.

Example::

    with ControlGuard(workspace) as guard:
        bwrap_args += guard.bind_args()
        ...  # run the command
        notes = guard.finish()   # ["removed sub/.git: ..."]
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

logger = logging.getLogger(__name__)

CONTROL_NAMES = frozenset({".ollm", ".git"})
"""Entry names that are control paths wherever they are in the workspace (compared
case-insensitively, for case-insensitive file systems)."""
TOP_PLACEHOLDERS = (".ollm", ".git")
"""Control folders covered by an empty read-only folder when absent at the top."""
_GIT_DIR_MARKS = ("HEAD", "objects", "refs")
_GIT_TIMEOUT_S = 5.0
_MARK = "user.ollm.cover"
"""Extended attribute naming a folder as a run's cover, for the last run to remove."""


class _Identity(NamedTuple):
    """What a control entry was before the run, to notice one replaced."""

    device: int
    inode: int
    kind: int
    link: str | None


def _identity(path: Path) -> _Identity | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    return _Identity(info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode), link)


class _Folder(NamedTuple):
    """One folder as a survey saw it: enough to reuse without listing it again."""

    inode: int
    ctime_ns: int
    subfolders: tuple[str, ...]
    controls: tuple[tuple[Path, _Identity], ...]
    git_dir: bool


class Survey(NamedTuple):
    """The control entries of a workspace (every ``.ollm``/``.git``, by path), the
    folders that look like bare git repositories, and what was seen of each folder
    (``taken_ns``: when), for the next survey to reuse."""

    entries: dict[Path, _Identity]
    git_dirs: frozenset[Path]
    folders: dict[str, _Folder]
    taken_ns: int

    @classmethod
    def empty(cls) -> Survey:
        """No survey yet."""
        return cls({}, frozenset(), {}, 0)

    def knows(self, identity: _Identity) -> bool:
        """Whether this entry (by device, inode, kind, link) was seen, at any path: a
        folder moved with its ``.git`` inside keeps it."""
        return identity in self._identities()

    def _identities(self) -> frozenset[_Identity]:
        return frozenset(self.entries.values())


_CLOCK_SLACK_NS = 1_000_000_000
"""A folder changed this close to a survey is listed again, whatever its ctime says
(the file system's clock is coarser than ours)."""


def survey(workspace: Path, previous: Survey | None = None) -> Survey:
    """Walk ``workspace`` (no symlink followed, no control folder entered) for the
    control entries at any depth and the folders that look like git directories.

    A folder whose inode and ctime are those ``previous`` saw (and not changed near
    it) is not listed again: creating, removing or renaming an entry in a folder, or
    setting its times, changes its ctime, which no user can set back.
    """
    taken = time.time_ns()
    folders: dict[str, _Folder] = {}
    pending = [str(workspace)]
    while pending:
        folder = pending.pop()
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        old = previous.folders.get(folder) if previous is not None else None
        if (
            old is not None
            and previous is not None
            and old.inode == info.st_ino
            and old.ctime_ns == info.st_ctime_ns
            and old.ctime_ns < previous.taken_ns - _CLOCK_SLACK_NS
        ):
            folders[folder] = old
            pending.extend(old.subfolders)
            continue
        seen = _list(folder, info)
        if seen is not None:
            folders[folder] = seen
            pending.extend(seen.subfolders)
    entries = {path: identity for f in folders.values() for path, identity in f.controls}
    git_dirs = frozenset(Path(name) for name, f in folders.items() if f.git_dir)
    return Survey(entries, git_dirs, folders, taken)


def _list(folder: str, info: os.stat_result) -> _Folder | None:
    subfolders: list[str] = []
    controls: list[tuple[Path, _Identity]] = []
    marks = 0
    try:
        listing = os.scandir(folder)
    except OSError:
        return None
    with listing:
        for child in listing:
            name = child.name
            if name.casefold() in CONTROL_NAMES:
                identity = _identity(Path(child.path))
                if identity is not None:
                    controls.append((Path(child.path), identity))
                continue
            if name in _GIT_DIR_MARKS:
                marks += 1
            try:
                if child.is_dir(follow_symlinks=False):
                    subfolders.append(child.path)
            except OSError:
                continue
    return _Folder(
        info.st_ino,
        info.st_ctime_ns,
        tuple(subfolders),
        tuple(controls),
        marks == len(_GIT_DIR_MARKS),
    )


def git_dir_of(entry: Path) -> Path | None:
    """The git directory a ``.git`` file (``gitdir: X``) or symlink leads to."""
    try:
        if entry.is_symlink():
            return entry.resolve()
        if entry.is_file():
            first = entry.read_text(errors="replace").partition("\n")[0]
            if first.startswith("gitdir:"):
                target = Path(first.removeprefix("gitdir:").strip())
                return (entry.parent / target).resolve()
    except (OSError, RuntimeError):
        return None
    return None


def hooks_path(git_dir: Path, work_tree: Path) -> Path | None:
    """The folder ``core.hooksPath`` of ``git_dir``'s own config names, resolved
    against ``work_tree`` (where git runs hooks from), or ``None``."""
    config = git_dir / "config"
    with contextlib.suppress(OSError):  # a linked worktree's config is its common dir's
        common = (git_dir / "commondir").read_text().strip()
        config = (git_dir / common / "config").resolve()
    try:
        text = config.read_bytes().lower()
    except OSError:
        return None
    if b"hookspath" not in text and b"include" not in text:
        return None  # the common case, without starting git
    git = shutil.which("git")
    if git is None:  # pragma: no cover - git is installed wherever OLLM runs tools
        return None
    try:
        done = subprocess.run(
            [git, "config", "--file", str(config), "--includes", "--get", "core.hooksPath"],
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
            env={"PATH": os.defpath, "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
            cwd=work_tree,
        )
    except (OSError, subprocess.TimeoutExpired):  # pragma: no cover
        return None
    value = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or not value:
        return None
    return Path(os.path.normpath(work_tree / Path(value).expanduser()))


def own_code_paths() -> list[Path]:
    """The Python environment OLLM runs from and OLLM's own package folder (where it is
    imported from, and where its files really are for an editable install)."""
    package = Path(__file__).absolute().parents[2]
    source = Path(__file__).resolve().parents[2]
    return [Path(sys.prefix).resolve(), package.resolve(), source]


def protected_in(workspace: Path, found: Survey) -> tuple[list[Path], list[Path]]:
    """``(existing, absent)``: the control paths inside ``workspace`` to bind read-only,
    and those to cover with an empty read-only folder for the run."""
    existing: list[Path] = list(found.entries)
    absent: list[Path] = [
        workspace / name for name in TOP_PLACEHOLDERS if workspace / name not in found.entries
    ]
    repositories = [entry for entry in found.entries if entry.name.casefold() == ".git"]
    enclosing = _enclosing_git(workspace)
    if enclosing is not None:
        repositories.append(enclosing)  # its hooksPath may name a folder in here
    for entry in repositories:
        target = git_dir_of(entry)
        git_dir = entry if target is None else target
        if target is not None and target.is_relative_to(workspace) and target.exists():
            existing.append(target)
        hooks = hooks_path(git_dir, entry.parent) if git_dir.is_dir() else None
        if hooks is not None and hooks.is_relative_to(workspace) and hooks != workspace:
            (existing if hooks.exists() else absent).append(hooks)
    for path in own_code_paths():
        if path.is_relative_to(workspace) and path != workspace and path.exists():
            existing.append(path)
    return _unique(existing), _unique(absent)


def _enclosing_git(workspace: Path) -> Path | None:
    """The ``.git`` of the repository the workspace is inside, if any."""
    for folder in workspace.parents:
        candidate = folder / ".git"
        if os.path.lexists(candidate):
            return candidate
    return None


def _unique(paths: list[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _shown(workspace: Path, path: Path) -> str:
    return str(path.relative_to(workspace)) if path.is_relative_to(workspace) else str(path)


class ControlGuard:
    """Protects one workspace's control paths for the time of one sandbox run."""

    def __init__(self, workspace: Path, previous: Survey | None = None) -> None:
        self.workspace = workspace
        self._lock_fd: int | None = None
        self._previous = previous
        self._before = Survey.empty()
        self.after = Survey.empty()
        """The survey after the run (for the next run to start from)."""
        self.existing: list[Path] = []
        self.placeholders: list[Path] = []

    def __enter__(self) -> ControlGuard:
        self._lock_fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_SH)
        except OSError as error:  # pragma: no cover - a file system without flock
            logger.debug("sandbox: no lock on %s (%s)", self.workspace, error.strerror)
        self._before = survey(self.workspace, self._previous)
        existing, absent = protected_in(self.workspace, self._before)
        self.existing = existing
        for path in absent:
            missing = [p for p in (path, *path.parents) if p.is_relative_to(self.workspace)]
            missing = [p for p in missing if not os.path.lexists(p)]
            for folder in reversed(missing):
                try:
                    folder.mkdir()
                except OSError as error:
                    # Made by a run beside this one (it is covered), or not makeable.
                    logger.debug("sandbox: could not cover %s (%s)", folder, error.strerror)
                    break
                self.placeholders.append(folder)
                with contextlib.suppress(OSError):
                    os.setxattr(folder, _MARK, b"1")
            if path not in self.placeholders and path.is_dir() and not path.is_symlink():
                self.existing.append(path)  # covered by a run beside this one
        return self

    def protected(self) -> list[Path]:
        """Every path bound read-only in the run (for the model's messages)."""
        return _unique([*self.existing, *self.placeholders])

    def shown_protected(self) -> list[str]:
        """:meth:`protected`, relative to the workspace."""
        return [_shown(self.workspace, path) for path in self.protected()]

    def bind_args(self) -> list[str]:
        """bubblewrap options binding each control path read-only onto itself."""
        args: list[str] = []
        for path in self.protected():
            if path.is_symlink():
                continue  # the target, if inside, is bound; the link is checked after
            args += ["--ro-bind", str(path), str(path)]
        return args

    def finish(self) -> list[str]:
        """After the run: undo what the command did to control paths, and say what.

        A control entry that is new or replaced is removed (a replaced symlink is
        put back as it was); a folder made into a bare git repository loses its
        ``HEAD``.
        """
        after = self.after = survey(self.workspace, self._before)
        covered = set(self.placeholders)
        notes: list[str] = []
        for path, identity in after.entries.items():
            if path in covered or self._before.knows(identity):
                continue
            notes.append(_removed(self.workspace, path))
        for path, identity in self._before.entries.items():
            if identity.link is not None and _identity(path) != identity:
                with contextlib.suppress(OSError):
                    if os.path.lexists(path):
                        _remove(path)
                    os.symlink(identity.link, path)
                    notes.append(f"restored the symlink {_shown(self.workspace, path)}")
        for folder in sorted(after.git_dirs - self._before.git_dirs):
            if os.path.lexists(folder / "HEAD"):
                note = _removed(self.workspace, folder / "HEAD")
                notes.append(f"{note} (the folder had become a bare git repository)")
        return notes

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:  # pragma: no cover - __enter__ always sets it
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # another run still uses the cover: the last one removes it
            return
        try:
            for path in reversed(self.protected()):
                if path in self.placeholders or _marked(path):
                    with contextlib.suppress(OSError):
                        path.rmdir()  # only while empty: never what someone put there since
        finally:
            os.close(fd)


def _marked(path: Path) -> bool:
    """Whether ``path`` is a cover another run made (and left for the last one)."""
    try:
        return os.getxattr(path, _MARK, follow_symlinks=False) == b"1"
    except OSError:
        return False


def _removed(workspace: Path, path: Path) -> str:
    """Remove ``path`` and say so, or say that it could not be (and warn)."""
    shown = _shown(workspace, path)
    try:
        _remove(path)
    except OSError as error:
        logger.warning("sandbox: could not remove %s (%s)", path, error.strerror)
        return (
            f"could NOT remove {shown} ({error.strerror}): remove it before running git "
            f"or ollm there"
        )
    return f"removed {shown}"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


_WATCHED_MAX_BYTES = 1024 * 1024


class ControlWatch:
    """The control paths around a tool that runs in OLLM's own process (one an
    extension adds), where no mount can protect them: looked at before the call and
    put back after it.

    New ``.ollm``/``.git`` entries are removed; the files of every ``.ollm`` folder
    and the ``config`` and ``hooks/`` of every ``.git`` folder are kept (up to
    1 MiB each) and restored if changed, removed if new.

    Example::

        watch = ControlWatch(workspace)
        output = tool.run(args, ctx)
        notes = watch.finish()       # ["restored .ollm/config.yaml"]
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._before = survey(workspace)
        self._kept = _watched_files(self._before)

    def finish(self) -> list[str]:
        """Undo what the call did to control paths, and say what."""
        notes: list[str] = []
        after = survey(self.workspace, self._before)
        for path, identity in after.entries.items():
            if not self._before.knows(identity):
                notes.append(_removed(self.workspace, path))
        now = _watched_files(after)
        for path, content in self._kept.items():
            if now.get(path) != content:
                with contextlib.suppress(OSError):
                    if os.path.lexists(path) and not path.is_file():
                        _remove(path)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(content)
                    notes.append(f"restored {_shown(self.workspace, path)}")
        for path in now.keys() - self._kept.keys():
            with contextlib.suppress(OSError):
                path.unlink()
                notes.append(f"removed {_shown(self.workspace, path)}")
        return notes


def _watched_files(found: Survey) -> dict[Path, bytes]:
    files: dict[Path, bytes] = {}
    for entry, identity in found.entries.items():
        if identity.kind != stat.S_IFDIR:
            continue
        if entry.name.casefold() == ".ollm":
            candidates = [p for p in entry.rglob("*") if not p.is_symlink()]
        else:
            candidates = [entry / "config", *(entry / "hooks").glob("*")]
        for path in candidates:
            with contextlib.suppress(OSError):
                small = path.is_file() and path.stat().st_size <= _WATCHED_MAX_BYTES
                if small and not path.is_symlink():
                    files[path] = path.read_bytes()
    return files
