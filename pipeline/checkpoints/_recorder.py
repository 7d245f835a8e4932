"""WorkspaceCheckpoints: the previous state of every file a session's tools change.

One per session, in ``{snapshots.dataDir}/{sessionId}/workspace/`` (so it is
deleted with the session and kept while the session is in the trash)::

    changes.jsonl      the FileChange log, and UnrecordedPaths lines (see _changes)
    blobs/ab/cdef...   the contents, by digest (see _blobs)
    baseline.json      {path: [inode, mtimeNs, size, digest]} of the workspace's files
    layers/            a running command's overlay (upper, work), removed once applied

Three ways to know what a tool changes, chosen by the tool and the machine:

- **Named paths** (``write_file``, ``edit_file``): the tool says which path it will
  write; its content is kept before the call, its new content after. A few
  milliseconds for one file.
- **An overlay** (``shell``, where overlayfs can be mounted in a user namespace:
  see the sandbox's ``_overlay``): the command sees the workspace through an
  overlay whose upper folder, ``layers/layer-*/upper``, receives every write; the
  real workspace is untouched while it runs. When it is gone, :meth:`settle`
  reads the upper folder (see ``_layer``), keeps the previous state of exactly
  those paths from the real workspace, applies the upper folder to it (file by
  file, atomically) and removes the overlay folder. Nothing is read or copied
  before the call; the cost grows with what the command changed, not with the
  workspace. A path that cannot be applied is logged with the overlay folder
  that still holds it.
- **A stat scan** (extension tools, and the shell where no overlay can be
  mounted): before the call every file of the workspace must be recoverable,
  because a command may change a file in place and its old content would be
  gone. The baseline keeps each file's content once, keyed by (inode, mtime,
  size): the first such call copies the workspace's files (compressed,
  deduplicated), later ones only stat them and copy what changed since. After
  the call a second stat manifest tells which paths were created, deleted,
  renamed (a delete plus a create) or changed, and only those are recorded. Its
  cost grows with the number of files (``python -m bench.checkpoints``).

Files over ``maxFileMb`` are not copied; a rewind names them. The folder is
bounded by ``maxMb`` in allocated blocks, the log included (see ``_budget``): past
it no new content is kept (nor read, for the stat scan's baseline), and the
changed files are named as not kept. A call records at most ``maxPathsPerCall``
of the paths it changed, the shallowest first (a folder it made or removed before
what the folder holds), and counts the others in one line (see ``_changes``):
past the cap nothing is read, what the command wrote is only moved into place.

Example::

    checkpoints = WorkspaceCheckpoints.of_session(root, sid, settings.checkpoints)
    pending = checkpoints.before(workspace, ["src/a.py"])   # None: anything may change
    ...                                                     # the tool runs
    checkpoints.after(pending, tool_call_id="c1")           # the lines it logged
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ollm_cli.config.settings import CheckpointSettings
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.checkpoints._blobs import BlobStore, BudgetExceeded
from ollm_cli.pipeline.checkpoints._budget import CONTENTS, LAYERS, NAMES, StoreBudget
from ollm_cli.pipeline.checkpoints._changes import (
    ABSENT,
    ChangeLog,
    FileChange,
    FileState,
    LogEntry,
    UnrecordedPaths,
    common_folder,
)
from ollm_cli.pipeline.checkpoints._layer import apply_upper, remove_layer, touched
from ollm_cli.pipeline.checkpoints._manifest import (
    SKIPPED_DIRS,
    Entry,
    FolderCheck,
    Manifest,
    diff,
    scan,
)
from ollm_cli.pipeline.errors import CheckpointError
from ollm_cli.pipeline.records import SessionId

logger = logging.getLogger(__name__)

FOLDER = "workspace"
BASELINE_FILE = "baseline.json"
_MB = 1024 * 1024
_LINE_FLOOR = 128
"""Fewer bytes than any line of the log: when not even this fits, nothing can be named."""


@dataclass
class PendingCheckpoint:
    """What :meth:`WorkspaceCheckpoints.before` kept, waiting for the call to end."""

    workspace: Path
    paths: list[str] | None
    """The named paths (relative, resolved), or None: the whole workspace was scanned."""
    before: dict[str, FileState] = field(default_factory=dict)
    manifest: Manifest | None = None
    layer: Path | None = None
    """The overlay folder (``upper``, ``work``) the command wrote to, or None."""
    settled: list[tuple[str, FileState, FileState]] | None = None
    """What :meth:`WorkspaceCheckpoints.settle` applied: (path, before, after)."""
    unrecorded: list[str] = field(default_factory=list)
    """The paths :meth:`WorkspaceCheckpoints.settle` applied without recording them."""
    unrecorded_why: list[str] = field(default_factory=list)

    @property
    def upper(self) -> Path:
        """The overlay's upper folder (only for a pending checkpoint with a layer)."""
        assert self.layer is not None
        return self.layer / "upper"

    @property
    def work(self) -> Path:
        """The overlay's work folder (only for a pending checkpoint with a layer)."""
        assert self.layer is not None
        return self.layer / "work"


def relative_in(workspace: Path, path: str) -> str | None:
    """``path`` (as a tool was given it) relative to the real workspace, or None when it
    leads outside (the tool refuses such a path; nothing to keep)."""
    root = os.path.realpath(workspace)
    real = os.path.realpath(os.path.join(root, path))
    if real == root or not real.startswith(root + os.sep):
        return None
    rel = os.path.relpath(real, root)
    return None if rel.split(os.sep)[0] in SKIPPED_DIRS else rel


def shallow_first(rel: str) -> tuple[int, str]:
    """The order in which a call's paths are recorded: by depth, then by name."""
    return rel.count("/"), rel


def _differs(before: FileState, after: FileState) -> bool:
    """Whether a path's state changed (a content that was not kept always counts)."""
    if "unkept" in (before.kind, after.kind):
        return True
    return not before.same_as(after) or before.mode != after.mode


class WorkspaceCheckpoints:
    """The checkpoint folder of one session: its log, its blobs, its baseline."""

    def __init__(self, folder: Path, settings: CheckpointSettings) -> None:
        self.folder = folder
        self.settings = settings
        self.budget = StoreBudget(folder, max_bytes=settings.max_mb * _MB)
        self.blobs = BlobStore(folder / "blobs", self.budget)
        self.log = ChangeLog(folder)
        self._baseline: dict[str, list[object]] | None = None

    @classmethod
    def of_session(
        cls, root: Path, session_id: str, settings: CheckpointSettings
    ) -> WorkspaceCheckpoints:
        """The checkpoints of ``session_id`` under ``root`` (``snapshots.dataDir``)."""
        from pydantic import TypeAdapter

        sid = TypeAdapter(SessionId).validate_python(session_id)
        return cls(root / sid / FOLDER, settings)

    # -- keeping states --------------------------------------------------------------

    def _keep(self, data: bytes, digest: str | None = None) -> tuple[str | None, str | None]:
        """Keep ``data``: ``(digest, None)``, or ``(None, reason)`` when it cannot be kept."""
        try:
            return self.blobs.put(data, digest), None
        except BudgetExceeded:
            return None, self._full
        except OSError as exc:
            return None, f"the checkpoint store cannot be written ({exc.strerror})"

    @property
    def _full(self) -> str:
        """Why a content was not kept once the store is full."""
        return f"the session's checkpoints reached checkpoints.maxMb ({self.settings.max_mb})"

    def _state(self, workspace: Path, rel: str, folders: FolderCheck) -> FileState:
        """The state of ``rel`` now, its content kept (absent when one of its folders
        is a symlink or a file now: what is reached through it is another path)."""
        if folders.blocker(rel) is not None:
            return ABSENT
        path = workspace / rel
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):  # a file holds its folder's place
            return ABSENT
        except OSError as exc:
            return FileState(kind="unkept", reason=f"cannot be read ({exc.strerror})")
        mode = st.st_mode & 0o7777
        if stat.S_ISLNK(st.st_mode):
            return FileState(kind="symlink", target=os.readlink(path))
        if stat.S_ISDIR(st.st_mode):
            return FileState(kind="dir", mode=mode)
        if not stat.S_ISREG(st.st_mode):
            return FileState(kind="unkept", reason="not a regular file")
        if st.st_size > self.settings.max_file_mb * _MB:
            return FileState(
                kind="unkept",
                size=st.st_size,
                reason=f"larger than checkpoints.maxFileMb ({self.settings.max_file_mb})",
            )
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            return FileState(kind="unkept", reason=f"cannot be read ({exc.strerror})")
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        digest, reason = self._keep(data)
        if digest is None:
            return FileState(kind="unkept", size=len(data), reason=reason)
        return FileState(kind="file", digest=digest, mode=mode, size=len(data))

    # -- the baseline (for tools that may change anything) --------------------------

    def _load_baseline(self) -> dict[str, list[object]]:
        if self._baseline is None:
            try:
                loaded = orjson.loads((self.folder / BASELINE_FILE).read_bytes())
                self._baseline = loaded if isinstance(loaded, dict) else {}
            except (OSError, orjson.JSONDecodeError):
                self._baseline = {}
        return self._baseline

    def _save_baseline(self) -> None:
        """Write the baseline when the budget leaves room for it (else it is kept for
        this process only, and a new one reads the files again)."""
        data = orjson.dumps(self._load_baseline())
        path = self.folder / BASELINE_FILE
        if not self.budget.replaceable(path, len(data), CONTENTS):
            logger.debug("checkpoints: no room for the baseline in %s", self.folder)
            return
        with contextlib.suppress(OSError):
            write_atomic(path, data)
            self.budget.track(path)

    def _baseline_state(
        self, workspace: Path, rel: str, entry: Entry, folders: FolderCheck, *, read: bool = True
    ) -> FileState:
        """The state of a scanned path, its content from the baseline when unchanged
        (``read=False``: never read now, the content is the one the baseline kept)."""
        if entry.kind == "dir":
            return FileState(kind="dir", mode=entry.mode)
        if entry.kind == "symlink":
            with contextlib.suppress(OSError):
                return FileState(kind="symlink", target=os.readlink(workspace / rel))
            return FileState(kind="unkept", reason="a symlink that cannot be read")
        baseline = self._load_baseline()
        known = baseline.get(rel)
        sig = [entry.ino, entry.mtime_ns, entry.size]
        if isinstance(known, list) and known[:3] == sig and isinstance(known[3], str):
            return FileState(kind="file", digest=known[3], mode=entry.mode, size=entry.size)
        if not read:
            return FileState(kind="unkept", reason="changed before its content could be kept")
        state = self._state(workspace, rel, folders)
        if state.kind == "file" and state.digest is not None:
            baseline[rel] = [*sig, state.digest]
        else:
            baseline.pop(rel, None)
        return state

    # -- around a tool call ----------------------------------------------------------

    def before(self, workspace: Path, paths: list[str] | None) -> PendingCheckpoint:
        """Keep what the call may change: the named ``paths``, or (None) the workspace."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folders = FolderCheck(workspace)
        if paths is not None:
            pending = PendingCheckpoint(workspace, [])
            for given in paths:
                rel = relative_in(workspace, given)
                if rel is None or rel in pending.before:
                    continue
                assert pending.paths is not None
                for parent in reversed(Path(rel).parents[:-1]):  # folders the tool may create
                    key = str(parent)
                    if key not in pending.before and not (workspace / key).exists():
                        pending.paths.append(key)
                        pending.before[key] = ABSENT
                pending.paths.append(rel)
                pending.before[rel] = self._state(workspace, rel, folders)
            return pending
        manifest = scan(workspace)
        pending = PendingCheckpoint(workspace, None, manifest=manifest)
        baseline = self._load_baseline()
        gone = [p for p in baseline if p not in manifest]
        for rel in gone:
            del baseline[rel]
        dirty = bool(gone)
        unknown = []
        for rel, entry in manifest.items():
            if entry.kind == "file":
                known = baseline.get(rel)
                if (  # unchanged since kept: the common case, no call, no object
                    known is not None
                    and known[0] == entry.ino
                    and known[1] == entry.mtime_ns
                    and known[2] == entry.size
                ):
                    continue
                unknown.append(rel)
            elif entry.kind == "symlink":  # its target, read now: after the call it may differ
                pending.before[rel] = self._baseline_state(workspace, rel, entry, folders)
        # kept in the order a call names what it changed: what fits is what is named
        full = self._full if self.blobs.full else None
        for rel in sorted(unknown, key=shallow_first):
            entry = manifest[rel]
            if full:  # not read: it could not be kept
                pending.before[rel] = FileState(kind="unkept", size=entry.size, reason=full)
                continue
            dirty = True
            state = self._baseline_state(workspace, rel, entry, folders)
            if state.kind != "file":  # not kept (too large, over budget): say so later
                pending.before[rel] = state
                full = self._full if self.blobs.full else None
        if dirty:
            self._save_baseline()
        return pending

    # -- a command that ran on an overlay of the workspace -----------------------------

    @property
    def layers(self) -> Path:
        """Where the overlays' upper and work folders are made."""
        return self.folder / LAYERS

    def before_layer(self, workspace: Path) -> PendingCheckpoint:
        """A fresh overlay folder for one command: nothing is read or copied now, the
        command's writes go to ``pending.upper`` (see the sandbox's ``_overlay``)."""
        if not self.layers.is_dir():
            self.layers.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.budget.track(self.layers)
        layer = Path(tempfile.mkdtemp(prefix="layer-", dir=self.layers))
        pending = PendingCheckpoint(workspace, None, layer=layer)
        pending.upper.mkdir()
        pending.work.mkdir()
        return pending

    def _examined(self, paths: list[str]) -> tuple[list[str], list[str], list[str]]:
        """``(examined, unrecorded, why)``: of a call's changed ``paths``, those whose
        states are read and recorded (the shallowest first, at most
        ``maxPathsPerCall``, none once the log cannot take a line), and the others."""
        paths = sorted(paths, key=shallow_first)
        cap = self.settings.max_paths_per_call
        if paths and not self.budget.appendable(self.log.path, [_LINE_FLOOR], NAMES):
            return [], paths, [self._full]
        if len(paths) > cap:
            return paths[:cap], paths[cap:], [self._capped]
        return paths, [], []

    @property
    def _capped(self) -> str:
        """Why the paths beyond the cap were not recorded."""
        cap = self.settings.max_paths_per_call
        return f"more than checkpoints.maxPathsPerCall ({cap}) in one call"

    def settle(self, pending: PendingCheckpoint) -> None:
        """Keep the previous state of the paths the overlay changed (see
        :meth:`_examined`), then apply it to the workspace (once; never raises: a path
        that cannot be applied is logged and its new content left in the overlay
        folder, named in the log)."""
        if pending.layer is None or pending.settled is not None:
            return
        workspace, upper = pending.workspace, pending.upper
        pending.settled = []
        try:
            paths = touched(upper, workspace)
        except OSError as error:
            logger.warning("checkpoints: the overlay %s cannot be read: %s", upper, error.strerror)
            paths = []
        paths, pending.unrecorded, pending.unrecorded_why = self._examined(paths)
        folders = FolderCheck(workspace)
        before = {rel: self._state(workspace, rel, folders) for rel in paths}
        try:
            failed = apply_upper(upper, workspace)
        except OSError as error:
            failed = [("", error.strerror or type(error).__name__)]
        folders = FolderCheck(workspace)
        for rel in paths:
            after = self._state(workspace, rel, folders)
            if _differs(before[rel], after):
                pending.settled.append((rel, before[rel], after))
        if failed:
            logger.warning(
                "checkpoints: %d path(s) the command changed could not be applied to the "
                "workspace (first: %s: %s); their new contents are in %s",
                len(failed),
                failed[0][0] or ".",
                failed[0][1],
                upper,
            )
        else:
            remove_layer(pending.layer)

    def after(self, pending: PendingCheckpoint, tool_call_id: str) -> list[LogEntry]:
        """Record what the call changed (nothing recorded when nothing changed); returns
        the lines added to the log."""
        workspace = pending.workspace
        changes: list[FileChange] = []
        unrecorded: list[str] = []
        why: list[str] = []
        where = str(workspace)
        if pending.layer is not None:
            self.settle(pending)  # the command never started: the overlay is empty
            assert pending.settled is not None
            changes = [
                FileChange(tool_call_id=tool_call_id, workspace=where, path=rel, before=b, after=a)
                for rel, b, a in pending.settled
            ]
            unrecorded, why = pending.unrecorded, pending.unrecorded_why
        elif pending.paths is not None:
            folders = FolderCheck(workspace)
            for rel in pending.paths:
                before = pending.before[rel]
                after = self._state(workspace, rel, folders)
                if not before.same_as(after) or before.mode != after.mode:
                    changes.append(
                        FileChange(
                            tool_call_id=tool_call_id,
                            workspace=where,
                            path=rel,
                            before=before,
                            after=after,
                        )
                    )
        else:
            assert pending.manifest is not None
            old = pending.manifest
            new = scan(workspace)
            created, deleted, changed = diff(old, new)
            paths, unrecorded, why = self._examined([*created, *deleted, *changed])
            baseline = self._load_baseline()
            folders = FolderCheck(workspace)
            for rel in paths:
                before = (
                    pending.before.get(rel)
                    or self._baseline_state(workspace, rel, old[rel], folders, read=False)
                    if rel in old
                    else ABSENT
                )
                after = (
                    self._baseline_state(workspace, rel, new[rel], folders)
                    if rel in new
                    else ABSENT
                )
                changes.append(
                    FileChange(
                        tool_call_id=tool_call_id,
                        workspace=where,
                        path=rel,
                        before=before,
                        after=after,
                    )
                )
            for rel in deleted:
                baseline.pop(rel, None)
            if paths or deleted:
                self._save_baseline()
        return self._record(tool_call_id, where, changes, unrecorded, why)

    def _record(
        self,
        tool_call_id: str,
        where: str,
        changes: list[FileChange],
        unrecorded: list[str],
        why: list[str],
    ) -> list[LogEntry]:
        """Append a call's lines to the log: as many of ``changes`` as the cap and the
        budget let it name, then one line counting the paths it did not name."""
        cap = self.settings.max_paths_per_call
        if len(changes) > cap:
            unrecorded = [*unrecorded, *(c.path for c in changes[cap:])]
            changes, why = changes[:cap], [*why, self._capped]
        lines = [ChangeLog.line(c) for c in changes]
        fitting = self.budget.appendable(self.log.path, [len(line) for line in lines], NAMES)
        if fitting < len(changes):
            unrecorded = [*unrecorded, *(c.path for c in changes[fitting:])]
            changes, why = changes[:fitting], [*why, self._full]
        entries: list[LogEntry] = list(changes)
        if unrecorded:
            note = UnrecordedPaths(
                tool_call_id=tool_call_id,
                workspace=where,
                path=common_folder(unrecorded),
                unrecorded=len(unrecorded),
                reason="; ".join(dict.fromkeys(why)),
            )
            entries.append(note)
        try:
            self.log.append(entries)
        except OSError as exc:
            raise CheckpointError(
                f"the checkpoint log {self.log.path} cannot be written ({exc.strerror}); "
                f"a rewind cannot undo tool call {tool_call_id}",
                hint="free some disk space in the snapshots folder (snapshots.dataDir)",
            ) from None
        self.budget.track(self.log.path)
        return entries

    # -- reading, forks --------------------------------------------------------------

    def changes(self) -> list[LogEntry]:
        """Every line of the log, oldest first."""
        return self.log.read()

    def changes_by_call(self) -> dict[str, list[LogEntry]]:
        """The log's lines of each tool call (by tool-call id), for views."""
        by_call: dict[str, list[LogEntry]] = {}
        for change in self.changes():
            by_call.setdefault(change.tool_call_id, []).append(change)
        return by_call

    def carry_over(self, into: WorkspaceCheckpoints, tool_call_ids: set[str]) -> int:
        """Give a fork the log lines of the tool calls it kept (and their contents);
        returns how many lines."""
        kept = [c for c in self.changes() if c.tool_call_id in tool_call_ids]
        if not kept:
            return 0
        into.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for change in kept:
            if isinstance(change, FileChange):
                for state in (change.before, change.after):
                    if state.digest is not None:
                        with contextlib.suppress(BudgetExceeded):  # named, not restorable
                            self.blobs.link_into(into.blobs, state.digest)
        into.log.append(kept)
        into.budget.track(into.log.path)
        return len(kept)
