"""The workspace boundary of the tools that run in the worker process.

The file and search tools do not run inside bubblewrap, so they keep to the
workspace themselves. Checking a path and then reopening it by name is a race:
another process can swap a folder for a symlink in between. So the file tools
never reopen by name: :func:`open_in_workspace` walks the path one component
at a time from an open descriptor of the workspace, opening each folder with
``O_NOFOLLOW`` relative to the previous one. A symlink met on the way is read
and resolved by this module, never by the kernel, and only if it stays inside
the workspace; what the tool then reads or writes is relative to the folder
descriptor it holds, so a later swap changes nothing. Where the kernel has
``openat2`` the common case (no symlink in the path) is one
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` call.

The workspace's control folders (``.ollm/``, ``.git/``, at any depth: see
:mod:`~ollm_cli.pipeline.tools._control_paths`) are never written by a tool: a
tool that could write ``.ollm/config.yaml`` or ``.git/hooks`` could make the
next command run code on the host.

:func:`resolve_in_workspace` (a checked path, not a descriptor) remains for the
search tools, which read through the FileDiscoveryService.

Example::

    with open_in_workspace(Path("/repo"), "src/app.py") as entry:
        fd = entry.open_file(os.O_RDONLY)
    resolve_in_workspace(Path("/repo"), "../../etc/passwd")  # raises ToolError
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools._control_paths import CONTROL_NAMES

MAX_SYMLINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# openat2(2): Linux 5.6+. struct open_how { u64 flags; u64 mode; u64 resolve; }
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _load_libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - every Linux has a libc
        return None


_libc = _load_libc()
_openat2_works: list[bool] = []


def openat2_beneath(dir_fd: int, path: str, flags: int) -> int:
    """``openat2(dir_fd, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``.

    Raises ``OSError`` (``ENOSYS`` where the kernel or libc lacks it; ``ELOOP``
    for a symlink on the way; ``EXDEV`` for a path that leaves ``dir_fd``).
    """
    if _libc is None or _openat2_works == [False]:
        raise OSError(errno.ENOSYS, "openat2 is not available")
    how = _OpenHow(
        flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
    )
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM) and not _openat2_works:
            _openat2_works.append(False)  # seccomp or an old kernel: walk instead
        raise OSError(code, os.strerror(code), path)
    if not _openat2_works:
        _openat2_works.append(True)
    return int(fd)


def has_openat2() -> bool:
    """Whether this kernel answers ``openat2`` (checked with one harmless call)."""
    if not _openat2_works:
        root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.close(openat2_beneath(root, ".", os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            pass
        finally:
            os.close(root)
    return _openat2_works == [True]


def _check_text(path: str) -> None:
    if not path.strip():
        raise ToolError("the path is empty", hint="give a path relative to the workspace")
    if "\0" in path:
        raise ToolError("the path holds a NUL byte", hint="give a plain file path")


def _outside(path: str, root: Path, how: str = "") -> ToolError:
    return ToolError(
        f"the path {path!r} {'leads' if how else 'is'} outside the workspace {root}{how}",
        hint="tools may only use files inside the workspace; give a path relative to it",
    )


def _relative_parts(root: Path, path: str) -> list[str]:
    """The components of ``path`` relative to ``root`` (``..`` kept for the walk)."""
    given = Path(path).expanduser()
    if given.is_absolute():
        normal = Path(os.path.normpath(given))
        if not normal.is_relative_to(root):
            raise _outside(path, root)
        return list(normal.relative_to(root).parts)
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if parts and os.path.normpath("/".join(parts)).split("/")[0] == "..":
        raise _outside(path, root)
    return parts


@dataclass
class WorkspaceEntry:
    """Where a path leads inside the workspace, held by descriptors.

    ``parent_fd`` is an open descriptor of the folder that holds the entry
    (the entry itself when it is the workspace root); ``name`` is the entry's
    name in that folder, or ``None`` when the path named a folder (then
    ``parent_fd`` is that folder). ``parts`` is the path relative to the
    workspace, symlinks resolved, as the user and the model see it.
    """

    parent_fd: int
    name: str | None
    parts: list[str]
    given: str
    _fds: list[int] = field(default_factory=list)

    @property
    def shown(self) -> str:
        """The path relative to the workspace (``.`` for the root)."""
        return "/".join(self.parts) or "."

    @property
    def is_dir(self) -> bool:
        """Whether the path named a folder."""
        return self.name is None

    def lstat(self) -> os.stat_result | None:
        """The entry's status (not following a symlink), or ``None`` if it does not exist."""
        if self.name is None:
            return os.fstat(self.parent_fd)
        try:
            return os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_file(self, flags: int, mode: int = 0o666) -> int:
        """Open the entry (never through a symlink; a FIFO is refused, not waited on)."""
        if self.name is None:
            raise ToolError(f"{self.shown} is a directory", hint="give the path of a file")
        try:
            fd = os.open(
                self.name,
                flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                mode,
                dir_fd=self.parent_fd,
            )
        except FileNotFoundError:
            raise ToolError(
                f"{self.given} does not exist in the workspace",
                hint="check the name with list_files or glob",
            ) from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ToolError(
                    f"{self.given} was replaced by a symlink while it was being opened",
                    hint="try again; nothing was read or written",
                ) from None
            if error.errno == errno.EISDIR:
                raise ToolError(f"{self.shown} is a directory", hint="give a file") from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise ToolError(
                f"{self.shown} is {describe_kind(info.st_mode)}, not a regular file",
                hint="the file tools read and write regular files only",
            )
        os.set_blocking(fd, True)
        return fd


def describe_kind(mode: int) -> str:
    """``a FIFO``, ``a socket``, ``a device``... for a message."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "a special file"


class _Walk:
    """The component-by-component walk (see the module docstring)."""

    def __init__(self, root: Path, root_fd: int, given: str, create: bool, protect: bool) -> None:
        self.root = root
        self.given = given
        self.create = create
        self.protect = protect
        self.stack = [root_fd]
        self.names: list[str] = []
        self.hops = 0

    def _check_protected(self, name: str) -> None:
        if self.protect and name.casefold() in CONTROL_NAMES:
            shown = "/".join([*self.names, name])
            raise ToolError(
                f"tools may not write in {shown} ({self.given!r}): .ollm and .git, at any "
                f"depth of the workspace, are protected",
                hint=f"{name} holds configuration that OLLM or git runs later on the host; "
                f"edit it yourself if you mean to",
            )

    def _splice(self, name: str, pending: list[str]) -> list[str]:
        """``name`` is a symlink: its target's components, checked to stay inside."""
        self.hops += 1
        if self.hops > MAX_SYMLINKS:
            raise ToolError(f"too many symlinks in {self.given!r}", hint="give the real path")
        try:
            target = os.readlink(name, dir_fd=self.stack[-1])
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.ENOENT):
                raise
            return [name, *pending]  # no longer a symlink: look at it again
        if os.path.isabs(target):
            normal = Path(os.path.normpath(target))
            if not normal.is_relative_to(self.root):
                raise _outside(self.given, self.root, " through a symlink")
            for fd in self.stack[1:]:
                os.close(fd)
            del self.stack[1:]
            self.names.clear()
            return list(normal.relative_to(self.root).parts) + pending
        return [p for p in target.split("/") if p not in ("", ".")] + pending

    def run(self, parts: list[str], want_dir: bool) -> WorkspaceEntry:
        pending = list(parts)
        while pending:
            name = pending.pop(0)
            if name == "..":
                if not self.names:
                    raise _outside(self.given, self.root, " through a symlink" if self.hops else "")
                os.close(self.stack.pop())
                self.names.pop()
                continue
            last = not pending
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.stack[-1])
            except OSError as error:
                code = error.errno
                if code == errno.ELOOP or (
                    code == errno.ENOTDIR and _is_link(name, self.stack[-1])
                ):
                    pending = self._splice(name, pending)
                    continue
                if code == errno.ENOTDIR and last and not want_dir:
                    self._check_protected(name)
                    return self._entry(name)
                if code == errno.ENOTDIR:
                    shown = "/".join([*self.names, name])
                    raise ToolError(
                        f"{shown} is not a directory"
                        + (" (the path ends with '/')" if last else ""),
                        hint="check the path with list_files",
                    ) from None
                if code == errno.ENOENT and last and not want_dir:
                    self._check_protected(name)
                    return self._entry(name)
                if code == errno.ENOENT and self.create:
                    self._check_protected(name)
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=self.stack[-1])
                    pending.insert(0, name)
                    continue
                if code == errno.ENOENT:
                    raise ToolError(
                        f"{self.given} does not exist in the workspace",
                        hint="check the name with list_files or glob",
                    ) from None
                raise
            if not last or self.create:
                self._check_protected(name)
            self.stack.append(fd)
            self.names.append(name)
        return WorkspaceEntry(self.stack[-1], None, list(self.names), self.given, self.stack)

    def _entry(self, name: str) -> WorkspaceEntry:
        return WorkspaceEntry(self.stack[-1], name, [*self.names, name], self.given, self.stack)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _fast(root: Path, root_fd: int, parts: list[str], given: str) -> WorkspaceEntry | None:
    """One ``openat2`` for the parent folder when the path holds no symlink and no ``..``."""
    if ".." in parts or not parts or not has_openat2():
        return None
    try:
        parent = openat2_beneath(root_fd, "/".join(parts[:-1]) or ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return WorkspaceEntry(parent, parts[-1], list(parts), given, [root_fd, parent])
    except OSError:
        os.close(parent)
        return None
    if stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
        os.close(parent)
        return None  # the walk opens folders and resolves links itself
    return WorkspaceEntry(parent, parts[-1], list(parts), given, [root_fd, parent])


@contextmanager
def open_in_workspace(
    workspace: Path,
    path: str,
    *,
    create_parents: bool = False,
    for_write: bool = False,
) -> Iterator[WorkspaceEntry]:
    """The entry ``path`` leads to, held by folder descriptors (closed on exit).

    Symlinks inside the workspace are followed (by this module, one component
    at a time); one that leads out, ``..`` past the root, an absolute path
    elsewhere, a file used as a folder, or a path ending with ``/`` that names
    a file raise :class:`ToolError`. ``for_write`` also refuses the control
    paths (a ``.ollm`` or ``.git`` at any depth, :data:`CONTROL_NAMES`);
    ``create_parents`` makes missing folders.
    """
    _check_text(path)
    root = workspace.resolve()
    parts = _relative_parts(root, path)
    want_dir = path.endswith("/") or path.endswith("/.")
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    entry: WorkspaceEntry | None = None
    try:
        protected = for_write and any(part.casefold() in CONTROL_NAMES for part in parts)
        if not want_dir and not protected:
            entry = _fast(root, root_fd, parts, path)
        if entry is None:
            entry = _Walk(root, root_fd, path, create_parents, for_write).run(parts, want_dir)
        yield entry
    finally:
        fds = entry._fds if entry is not None else []
        for fd in {root_fd, *fds}:
            with suppress(OSError):
                os.close(fd)


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute inside it) fully resolved.

    Raises :class:`ToolError` when the path is empty, holds a NUL byte, or
    leads outside the workspace (``..``, an absolute path elsewhere, a symlink
    whose target is elsewhere). A name, not a descriptor: the file tools use
    :func:`open_in_workspace` instead.
    """
    root = workspace.resolve()
    _check_text(path)
    candidate = Path(os.path.normpath(root / Path(path).expanduser()))
    if not candidate.is_relative_to(root):
        raise _outside(path, root)
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise _outside(path, root, " through a symlink")
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, as the user and the model see it."""
    relative = path.relative_to(workspace.resolve())
    return str(relative) if str(relative) != "." else "."
