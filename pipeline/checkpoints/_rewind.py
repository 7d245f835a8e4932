"""Putting the workspace back as it was before some tool calls.

:func:`plan_rewind` takes a session's change log and the tool calls to undo and
gives, for each path they changed, the state to restore (the state before the
first undone change) and the state the tools left (after the last one); and, for
the paths a call did not record (see ``_changes``), the folder holding them and
how many. :func:`apply_rewind` then:

1. checks the workspace is still there and writable, and that every content it
   needs is in the store and undamaged (:class:`CheckpointError` otherwise,
   before anything is touched);
2. compares each path, the shallowest first, with the state the tools left: a
   path changed since (by the user) is a conflict; ``on_conflict`` says what to
   do: ``refuse`` (raise :class:`RewindConflict` naming them, nothing changed),
   ``keep`` (leave them, reported as skipped) or ``overwrite``. A path under a
   folder the rewind makes anew (the tools put a symlink or a file in its place)
   is compared with nothing: there is nothing there until the folder is back. A
   path under a folder that is now a symlink or a file, and stays one, is left
   as it is and reported (writing it would reach another path);
3. restores file by file, each atomically (a temporary file in the same folder,
   fsynced, renamed over the path), folders the tools created last (removed only
   when empty). Files the tools did not change are never touched.

Every path the plan names is either restored or reported as skipped with why, in
one rewind: not kept, not recorded, changed since, its folder not empty or no
longer a folder.

A failure mid-restore (a full disk) stops there: the error lists the files
already restored; the others are left as they were, none half-written.

Example::

    plan = plan_rewind(checkpoints.changes(), undo={"c3", "c4"})
    report = apply_rewind(plan, checkpoints.blobs, on_conflict="keep")
    for item in report.items: print(item.path, item.action)
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from ollm_cli.pipeline.checkpoints._blobs import BlobStore, digest_of
from ollm_cli.pipeline.checkpoints._changes import ABSENT, FileState, LogEntry, UnrecordedPaths
from ollm_cli.pipeline.checkpoints._manifest import FolderCheck
from ollm_cli.pipeline.errors import CheckpointError
from ollm_cli.pipeline.records import Record

OnConflict = Literal["refuse", "keep", "overwrite"]
Action = Literal["restored", "deleted", "created folder", "removed folder", "skipped"]


class PathRewind(Record):
    """One path to put back: from what the tools left to what was there before."""

    workspace: str
    path: str
    restore: FileState
    left: FileState
    unrecorded: int = 0
    """Not a path to restore: the count of the undone calls' paths under ``path``
    that were not recorded (``restore.reason`` says why)."""


class RewindItem(Record):
    """What the rewind did with one path."""

    path: str
    action: Action
    reason: str | None = None


class RewindReport(Record):
    """What a rewind did, path by path."""

    workspace: str | None = None
    items: list[RewindItem]

    @property
    def restored(self) -> list[RewindItem]:
        """The paths put back."""
        return [i for i in self.items if i.action != "skipped"]

    @property
    def skipped(self) -> list[RewindItem]:
        """The paths left as they are, with why."""
        return [i for i in self.items if i.action == "skipped"]


class RewindConflict(CheckpointError):
    """Files the tools changed were changed again since (by the user)."""

    def __init__(self, paths: list[str]) -> None:
        shown = ", ".join(paths[:10]) + (", ..." if len(paths) > 10 else "")
        super().__init__(
            f"{len(paths)} file(s) changed since the tools wrote them: {shown}; nothing "
            "was restored",
            hint="rerun with --keep-user-changes to restore the others and leave these, "
            "or --overwrite-user-changes to restore them too",
        )
        self.paths = paths


class RewindFailed(CheckpointError):
    """A restore stopped partway (the files restored so far are listed)."""

    def __init__(self, message: str, report: RewindReport) -> None:
        done = ", ".join(i.path for i in report.restored) or "none"
        super().__init__(
            f"{message}; restored before it stopped: {done}; the other files were left "
            "as they were",
            hint="free some space (or fix the permissions) and rewind again: the restored "
            "files are skipped as already right",
        )
        self.report = report


def plan_rewind(changes: Sequence[LogEntry], undo: set[str]) -> list[PathRewind]:
    """For each path changed by the tool calls in ``undo``: what to put back (and, for
    each folder holding paths they did not record, how many)."""
    plan: dict[tuple[str, str, bool], PathRewind] = {}
    for change in changes:
        if change.tool_call_id not in undo:
            continue
        if isinstance(change, UnrecordedPaths):
            key = (change.workspace, change.path, True)
            if key in plan:
                known = plan[key]
                known.unrecorded += change.unrecorded
                reasons = f"{known.restore.reason}; {change.reason}".split("; ")
                known.restore = FileState(kind="unkept", reason="; ".join(dict.fromkeys(reasons)))
            else:
                noted = FileState(kind="unkept", reason=change.reason)
                plan[key] = PathRewind(
                    workspace=change.workspace,
                    path=change.path,
                    restore=noted,
                    left=noted,
                    unrecorded=change.unrecorded,
                )
            continue
        key = (change.workspace, change.path, False)
        if key in plan:
            plan[key].left = change.after
        else:
            plan[key] = PathRewind(
                workspace=change.workspace,
                path=change.path,
                restore=change.before,
                left=change.after,
            )
    return [p for p in plan.values() if not _same(p.restore, p.left) or p.restore.kind == "unkept"]


def _same(one: FileState, other: FileState) -> bool:
    """The same content, and for files the same mode (``chmod +x`` is a change)."""
    if not one.same_as(other):
        return False
    return one.kind != "file" or one.mode is None or other.mode is None or one.mode == other.mode


def current_state(workspace: Path, rel: str) -> FileState:
    """What ``rel`` is now (its content digested, not kept)."""
    path = workspace / rel
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # gone, or a file holds its folder's place
        return FileState(kind="absent")
    if stat.S_ISLNK(st.st_mode):
        return FileState(kind="symlink", target=os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return FileState(kind="dir", mode=st.st_mode & 0o7777)
    if not stat.S_ISREG(st.st_mode):
        return FileState(kind="unkept", reason="not a regular file")
    with open(path, "rb") as handle:
        data = handle.read()
    return FileState(kind="file", digest=digest_of(data), mode=st.st_mode & 0o7777, size=len(data))


def _within(rel: str) -> bool:
    """Whether ``rel`` names a path under the workspace (not itself, nothing above it)."""
    parts = rel.split("/")
    return bool(rel) and not os.path.isabs(rel) and ".." not in parts and rel != "."


def _folders(rel: str) -> list[str]:
    """The folders leading to ``rel``, the shallowest first."""
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]


def _write_file(path: Path, data: bytes, mode: int | None) -> None:
    """Put ``data`` at ``path`` atomically (temporary file in its folder, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.rewind")
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), 0o644 if mode is None else mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _remove(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        os.rmdir(path)
    else:
        os.unlink(path)


def apply_rewind(
    plan: list[PathRewind],
    blobs: BlobStore,
    *,
    on_conflict: OnConflict = "refuse",
    workspace: Path | None = None,
) -> RewindReport:
    """Carry out ``plan`` (see the module's docstring); ``workspace`` replaces the
    recorded one (a workspace that moved)."""
    if not plan:
        return RewindReport(items=[])
    roots = {p.workspace for p in plan}
    if workspace is None and len(roots) > 1:
        raise CheckpointError(
            f"the tool calls to undo ran in {len(roots)} workspaces: {', '.join(sorted(roots))}",
            hint="rewind them one workspace at a time with --workspace",
        )
    root = workspace or Path(next(iter(roots)))
    if not root.is_dir():
        raise CheckpointError(
            f"the workspace {root} is not there any more (moved or deleted); nothing was restored",
            hint="give its new place with --workspace PATH, or rewind with --no-files",
        )
    items: list[RewindItem] = []
    todo: list[PathRewind] = []
    conflicts: list[str] = []
    folders = FolderCheck(root)
    fresh: set[str] = set()
    """The folders this rewind makes anew, where a symlink or a file is now."""
    for entry in sorted(plan, key=lambda e: (e.path.count("/"), e.path)):
        skipped = _skipped(entry, folders, fresh)
        if skipped is not None:
            if skipped:
                items.append(RewindItem(path=entry.path, action="skipped", reason=skipped))
            continue
        if fresh.intersection(_folders(entry.path)):
            now = ABSENT  # what is there now goes with the symlink or file in its place
        else:
            try:
                now = current_state(root, entry.path)
            except OSError as exc:
                raise CheckpointError(
                    f"cannot read {entry.path} in {root} ({exc.strerror}); nothing was restored",
                    hint="check the workspace's permissions",
                ) from None
            if _same(now, entry.restore):
                continue  # already as it was
            if (
                entry.left.kind not in ("unkept", "dir")
                and not now.same_as(entry.left)
                and on_conflict != "overwrite"
            ):
                if on_conflict == "keep":
                    reason = "changed since the tools wrote it"
                    items.append(RewindItem(path=entry.path, action="skipped", reason=reason))
                else:
                    conflicts.append(entry.path)
                continue
        if entry.restore.kind == "dir" and now.kind != "dir":
            fresh.add(entry.path)
        todo.append(entry)
    if conflicts:
        raise RewindConflict(conflicts)
    contents: dict[str, bytes] = {}
    for entry in todo:  # every content checked before the first file is touched
        digest = entry.restore.digest
        if entry.restore.kind == "file" and digest is not None and digest not in contents:
            contents[digest] = blobs.get(digest)
    for entry in todo:
        folder = (root / entry.path).parent
        while not folder.exists() and folder != root:
            folder = folder.parent
        if not os.access(folder, os.W_OK):
            raise CheckpointError(
                f"the workspace {root} is read-only here ({folder}); nothing was restored",
                hint="make it writable and rewind again, or rewind with --no-files",
            )
    # What the tools created goes first, deepest first (a folder once emptied, a file
    # once the folder in its place is gone); then what they changed or removed comes
    # back, shallowest first (a folder before its files).
    removals = sorted(
        (e for e in todo if e.restore.kind == "absent"),
        key=lambda e: e.path.count("/"),
        reverse=True,
    )
    puts = sorted((e for e in todo if e.restore.kind != "absent"), key=lambda e: e.path.count("/"))
    for entry in [*removals, *puts]:
        path = root / entry.path
        try:
            action = _restore_one(path, entry, contents)
        except OSError as exc:
            if entry.left.kind == "dir" and exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                # files the tools did not make are in it (the user's)
                items.append(
                    RewindItem(path=entry.path, action="skipped", reason="folder not empty")
                )
                continue
            report = RewindReport(workspace=str(root), items=items)
            raise RewindFailed(f"cannot restore {entry.path}: {exc.strerror}", report) from None
        items.append(RewindItem(path=entry.path, action=action))
    return RewindReport(workspace=str(root), items=items)


def _skipped(entry: PathRewind, folders: FolderCheck, fresh: set[str]) -> str | None:
    """Why ``entry`` is not restored (``""``: nothing to do, nothing to say), or None
    when it is to be compared and restored."""
    if entry.unrecorded:
        return (
            f"{entry.unrecorded:,} more path change(s) under it were not recorded "
            f"({entry.restore.reason}); left as they are"
        )
    if entry.restore.kind == "unkept":
        return f"not kept: {entry.restore.reason}"
    if not _within(entry.path):
        return "not a path inside the workspace"
    if fresh.intersection(_folders(entry.path)):
        return "" if entry.restore.kind == "absent" else None
    blocked = folders.blocker(entry.path)
    if blocked is None:
        return None
    if entry.restore.kind == "absent":
        return ""  # it is not there: what the symlink or file leads to is another path
    folder, kind = blocked
    return f"its folder {folder} is a {kind} now, not a folder; left as it is"


def _restore_one(path: Path, entry: PathRewind, contents: dict[str, bytes]) -> Action:
    restore = entry.restore
    if restore.kind == "absent":
        with contextlib.suppress(FileNotFoundError):
            _remove(path)
        return "removed folder" if entry.left.kind == "dir" else "deleted"
    if restore.kind == "dir":
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            _remove(path)
        path.mkdir(parents=True, exist_ok=True)
        if restore.mode is not None:
            os.chmod(path, restore.mode)
        return "created folder"
    if path.is_dir() and not path.is_symlink():  # a folder in its place: once emptied
        os.rmdir(path)
    if restore.kind == "symlink":
        assert restore.target is not None
        temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.rewind")
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(restore.target, temporary)
        os.replace(temporary, path)
        return "restored"
    assert restore.digest is not None
    _write_file(path, contents[restore.digest], restore.mode)
    return "restored"
