"""The SnapshotManager: rollback points of a session's active context (spec 003).

A snapshot captures the active context as it is (every user message in full,
the other messages, the checkpoints, the system prompt), with its token count
and a one-line summary. One is written before every compression and when the
user asks (``/snapshot``); the oldest beyond ``maxCount`` are removed. Restoring
gives back exactly what was captured.

Layout under ``snapshots.dataDir`` (``~/.ollm/context-snapshots``)::

    snapshot-map.json                      snapshot id -> session id
    {sessionId}/snapshots/snapshot-{id}.json
    {sessionId}/snapshots/snapshots-index.json
    {sessionId}/active-context.json        a restored context waiting for resume

Files are 0600, folders 0700, every write atomic (temporary file, fsync,
rename); with a redactor (``services.session.redactSecrets``, on by default)
every secret in a snapshot is masked before it is written, as in the session
file: restoring gives back the masks, never the secrets. Changes to the map
and the indexes hold a lock file so that the CLI and a running chat do not lose
each other's entries.

``ollm snapshots restore`` stores the restored context as the session's *active
context override*; the pipeline picks it up when the session is resumed
(:meth:`SnapshotManager.take_active_override`).

Example::

    manager = SnapshotManager(settings.snapshots)
    info = manager.create_snapshot(sid, context, token_count=5940, summary="before compression",
                                   reason="auto")
    manager.restore_snapshot(info.id) == context      # True (with no secret in it)
"""

from __future__ import annotations

import fcntl
import logging
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from pydantic import Field, ValidationError

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.config.settings import SnapshotSettings
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.compression._active_context import ActiveContext, is_checkpoint
from ollm_cli.pipeline.compression._snapshot_info import SnapshotInfo, SnapshotReason
from ollm_cli.pipeline.environment import Redactor
from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording import checked_id, is_session_id, redact_record
from ollm_cli.pipeline.records import Record, SessionMessage, Timestamp, now_iso

logger = logging.getLogger(__name__)

SNAPSHOT_FORMAT = 1
ID_LENGTH = 12
MIN_PREFIX = 4
MAP_FILE = "snapshot-map.json"
INDEX_FILE = "snapshots-index.json"
OVERRIDE_FILE = "active-context.json"
LOCK_FILE = ".lock"
_ID_PATTERN = re.compile(rf"^[0-9a-f]{{{MIN_PREFIX},32}}$")


class SnapshotError(SessionError):
    """A snapshot could not be found, read or written."""


class SnapshotNotFoundError(SnapshotError):
    """No snapshot has the given id or prefix."""


class InvalidSnapshotIdError(SnapshotError):
    """A user-supplied snapshot id is not a snapshot id."""


class AmbiguousSnapshotIdError(SnapshotError):
    """A snapshot-id prefix matches more than one snapshot."""


class SnapshotMetadata(Record):
    """``metadata`` of a snapshot (spec 003)."""

    model: str | None = None
    context_size: int | None = None
    compression_ratio: float | None = None
    total_user_messages: int = 0
    total_checkpoints: int = 0


class ContextSnapshot(Record):
    """A snapshot file: spec 003's ``ContextSnapshot`` plus what exact restore needs.

    User messages are kept apart in full (``userMessages``); ``messages`` holds
    the others; ``userPositions`` says where each user message sat among the
    live messages, so that the context comes back in its order.
    """

    version: int = SNAPSHOT_FORMAT
    id: str
    session_id: str
    timestamp: Timestamp = Field(default_factory=now_iso)
    token_count: int
    summary: str
    reason: SnapshotReason
    system_prompt: str = ""
    user_messages: list[SessionMessage] = Field(default_factory=list)
    archived_user_messages: list[SessionMessage] = Field(default_factory=list)
    messages: list[SessionMessage] = Field(default_factory=list)
    user_positions: list[int] = Field(default_factory=list)
    checkpoints: list[SessionMessage] = Field(default_factory=list)
    covers_through: int = 0
    covered_head: int = 0
    head_positions: list[int | None] = Field(default_factory=list)
    metadata: SnapshotMetadata = Field(default_factory=SnapshotMetadata)

    @classmethod
    def capture(
        cls,
        snapshot_id: str,
        session_id: str,
        context: ActiveContext,
        *,
        token_count: int,
        summary: str,
        reason: SnapshotReason,
        model: str | None = None,
        context_size: int | None = None,
    ) -> ContextSnapshot:
        """A snapshot of ``context`` (copied, so later changes do not leak in)."""
        users: list[SessionMessage] = []
        others: list[SessionMessage] = []
        positions: list[int] = []
        for position, message in enumerate(context.messages):
            if message.role == "user":
                users.append(message.model_copy(deep=True))
                positions.append(position)
            else:
                others.append(message.model_copy(deep=True))
        return cls(
            id=snapshot_id,
            session_id=session_id,
            token_count=token_count,
            summary=summary,
            reason=reason,
            system_prompt=context.system_prompt,
            user_messages=users,
            messages=others,
            user_positions=positions,
            checkpoints=[c.model_copy(deep=True) for c in context.checkpoints],
            covers_through=context.covers_through,
            covered_head=context.covered_head,
            head_positions=list(context.head_positions),
            metadata=SnapshotMetadata(
                model=model,
                context_size=context_size,
                total_user_messages=len(users),
                total_checkpoints=sum(1 for c in context.checkpoints if is_checkpoint(c)),
            ),
        )

    def to_context(self) -> ActiveContext:
        """The active context captured, in its original order."""
        total = len(self.user_messages) + len(self.messages)
        if len(self.user_positions) != len(self.user_messages) or any(
            not 0 <= p < total for p in self.user_positions
        ):
            raise SnapshotError(
                f"snapshot {self.id} is inconsistent: its user messages do not match their "
                "positions",
                hint=f"delete it with `ollm snapshots delete {self.id}`",
            )
        slots: list[SessionMessage | None] = [None] * total
        for position, message in zip(self.user_positions, self.user_messages, strict=True):
            slots[position] = message
        others = iter(self.messages)
        ordered = [slot if slot is not None else next(others) for slot in slots]
        return ActiveContext(
            system_prompt=self.system_prompt,
            checkpoints=list(self.checkpoints),
            messages=ordered,
            covers_through=self.covers_through,
            covered_head=self.covered_head,
            head_positions=list(self.head_positions),
        )

    def info(self) -> SnapshotInfo:
        """The index entry of this snapshot."""
        return SnapshotInfo(
            id=self.id,
            session_id=self.session_id,
            timestamp=self.timestamp,
            token_count=self.token_count,
            summary=self.summary,
            reason=self.reason,
            message_count=len(self.user_messages) + len(self.messages),
            user_message_count=len(self.user_messages),
        )


class SnapshotIndex(Record):
    """``snapshots-index.json``: a session's snapshots, oldest first."""

    version: int = SNAPSHOT_FORMAT
    snapshots: list[SnapshotInfo] = Field(default_factory=list)


class SnapshotMap(Record):
    """``snapshot-map.json``: which session each snapshot id belongs to."""

    version: int = SNAPSHOT_FORMAT
    snapshots: dict[str, str] = Field(default_factory=dict)


def normalize_snapshot_id(text: str) -> str:
    """A snapshot id or prefix as typed by a user, checked before it names a file."""
    candidate = text.strip().lower().removeprefix("snapshot-")
    if not _ID_PATTERN.match(candidate):
        raise InvalidSnapshotIdError(
            f"{text!r} is not a snapshot id: ids are {ID_LENGTH} hexadecimal characters "
            f"(a prefix of at least {MIN_PREFIX} is enough)",
            hint="`ollm snapshots list SESSION` shows the ids",
        )
    return candidate


class SnapshotManager:
    """Creates, lists, restores and deletes snapshots of active contexts.

    ``root`` overrides ``settings.data_dir`` (the snapshots root folder).
    """

    def __init__(
        self,
        settings: SnapshotSettings | None = None,
        root: Path | None = None,
        *,
        redactor: Redactor | None = None,
    ) -> None:
        """``redactor``: masks every secret of a snapshot before it is written, as the
        session store masks the session's (``services.session.redactSecrets``)."""
        self.settings = settings or SnapshotSettings()
        self.root = root or self.settings.data_dir
        self.redactor = redactor
        self._thread_lock = threading.RLock()
        self._above: dict[str, bool] = {}

    # -- paths ----------------------------------------------------------------

    def session_dir(self, session_id: str) -> Path:
        """``{root}/{sessionId}``: a session's snapshots and its restore override."""
        return self.root / checked_id(session_id)

    def _snapshots_dir(self, session_id: str) -> Path:
        return self.session_dir(session_id) / "snapshots"

    def _snapshot_path(self, session_id: str, snapshot_id: str) -> Path:
        return self._snapshots_dir(session_id) / f"snapshot-{snapshot_id}.json"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            ensure_private_dir(self.root)
            with (self.root / LOCK_FILE).open("a") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # -- map and indexes ------------------------------------------------------------

    def _read_map(self) -> SnapshotMap:
        path = self.root / MAP_FILE
        try:
            return SnapshotMap.model_validate(orjson.loads(path.read_bytes()))
        except FileNotFoundError:
            return self._rebuild_map() if self.root.is_dir() else SnapshotMap()
        except (OSError, orjson.JSONDecodeError, ValidationError):
            logger.warning("snapshot map %s is damaged; rebuilding it from the indexes", path)
            return self._rebuild_map()

    def _rebuild_map(self) -> SnapshotMap:
        mapping = SnapshotMap()
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if not folder.is_dir() or not is_session_id(folder.name):
                continue
            for info in self._read_index(folder.name).snapshots:
                mapping.snapshots[info.id] = folder.name
        return mapping

    def _write_map(self, mapping: SnapshotMap) -> None:
        """Write the map, leaving out sessions whose folder is gone (deleted sessions)."""
        live = {owner for owner in set(mapping.snapshots.values()) if (self.root / owner).is_dir()}
        mapping.snapshots = {
            sid: owner for sid, owner in mapping.snapshots.items() if owner in live
        }
        write_atomic(self.root / MAP_FILE, orjson.dumps(mapping.to_dict()))

    def _read_index(self, session_id: str) -> SnapshotIndex:
        path = self._snapshots_dir(session_id) / INDEX_FILE
        try:
            return SnapshotIndex.model_validate(orjson.loads(path.read_bytes()))
        except FileNotFoundError:
            if not path.parent.is_dir():
                return SnapshotIndex()
        except (OSError, orjson.JSONDecodeError, ValidationError):
            logger.warning("snapshot index %s is damaged; rebuilding it from the files", path)
        return self._rebuild_index(session_id)

    def _rebuild_index(self, session_id: str) -> SnapshotIndex:
        infos: list[SnapshotInfo] = []
        for path in self._snapshots_dir(session_id).glob("snapshot-*.json"):
            try:
                infos.append(ContextSnapshot.model_validate(orjson.loads(path.read_bytes())).info())
            except (OSError, orjson.JSONDecodeError, ValidationError):
                logger.warning("skipping damaged snapshot file %s", path)
        infos.sort(key=lambda info: info.timestamp)
        return SnapshotIndex(snapshots=infos)

    def _write_index(self, session_id: str, index: SnapshotIndex) -> None:
        directory = ensure_private_dir(self._snapshots_dir(session_id))
        ensure_private_dir(directory.parent)
        write_atomic(directory / INDEX_FILE, orjson.dumps(index.to_dict()))

    # -- operations -------------------------------------------------------------

    def _new_id(self) -> str:
        return uuid.uuid4().hex[:ID_LENGTH]

    def manual_snapshot(
        self, session_id: str, context: ActiveContext, token_count: int
    ) -> SnapshotInfo:
        """``/snapshot``: the active context as it is now."""
        return self.create_snapshot(
            session_id,
            context,
            token_count=token_count,
            summary=f"manual snapshot of {len(context.messages)} messages",
            reason="manual",
        )

    def automatic_snapshot(
        self, session_id: str, context: ActiveContext, token_count: int, share: float
    ) -> SnapshotInfo:
        """Spec 003's automatic snapshot: usage reached ``autoThreshold`` (``share``
        of the window) and no compression took one."""
        return self.create_snapshot(
            session_id,
            context,
            token_count=token_count,
            summary=f"at {share:.0%} of the window ({token_count} tokens)",
            reason="auto",
        )

    def create_snapshot(
        self,
        session_id: str,
        context: ActiveContext,
        *,
        token_count: int,
        summary: str,
        reason: SnapshotReason,
        model: str | None = None,
        context_size: int | None = None,
    ) -> SnapshotInfo:
        """Write a snapshot of ``context``; the oldest beyond ``maxCount`` are removed."""
        checked_id(session_id)
        snapshot_id = self._new_id()
        snapshot = ContextSnapshot.capture(
            snapshot_id,
            session_id,
            context,
            token_count=token_count,
            summary=summary,
            reason=reason,
            model=model,
            context_size=context_size,
        )
        if self.redactor is not None:
            snapshot = redact_record(snapshot, self.redactor)
        with self._locked():
            ensure_private_dir(self.session_dir(session_id))
            ensure_private_dir(self._snapshots_dir(session_id))
            write_atomic(
                self._snapshot_path(session_id, snapshot_id), orjson.dumps(snapshot.to_dict())
            )
            index = self._read_index(session_id)
            index.snapshots = [s for s in index.snapshots if s.id != snapshot_id]
            index.snapshots.append(snapshot.info())
            removed = index.snapshots[: max(0, len(index.snapshots) - self.settings.max_count)]
            index.snapshots = index.snapshots[len(removed) :]
            for old in removed:
                self._snapshot_path(session_id, old.id).unlink(missing_ok=True)
            self._write_index(session_id, index)
            mapping = self._read_map()
            for old in removed:
                mapping.snapshots.pop(old.id, None)
            mapping.snapshots[snapshot_id] = session_id
            self._write_map(mapping)
        if removed:
            logger.info(
                "snapshots of %s: removed %d beyond the %d kept",
                session_id,
                len(removed),
                self.settings.max_count,
            )
        logger.info("snapshot %s of session %s created (%s)", snapshot_id, session_id, reason)
        return snapshot.info()

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        """The snapshots of a session, newest first."""
        return list(reversed(self._read_index(session_id).snapshots))

    def resolve_id(self, text: str) -> tuple[str, str]:
        """``(snapshot id, session id)`` for a snapshot id or unique prefix."""
        prefix = normalize_snapshot_id(text)
        known = {
            sid: owner
            for sid, owner in self._read_map().snapshots.items()
            if sid.startswith(prefix) and self._snapshot_path(owner, sid).is_file()
        }
        if prefix in known:
            return prefix, known[prefix]
        matches = sorted(known)
        if not matches:
            raise SnapshotNotFoundError(
                f"no snapshot has the id {prefix!r}",
                hint="`ollm snapshots list SESSION` shows the snapshots of a session",
            )
        if len(matches) > 1:
            raise AmbiguousSnapshotIdError(
                f"{prefix!r} matches {len(matches)} snapshots: {', '.join(matches[:5])}",
                hint="type more characters of the id",
            )
        return matches[0], known[matches[0]]

    def get_snapshot(self, snapshot_id: str) -> ContextSnapshot:
        """The whole snapshot ``snapshot_id`` (an id or unique prefix)."""
        full_id, session_id = self.resolve_id(snapshot_id)
        path = self._snapshot_path(session_id, full_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # pragma: no cover - deleted since resolve_id looked
            raise SnapshotNotFoundError(
                f"snapshot {full_id} of session {session_id} has no file any more",
                hint=f"remove the entry with `ollm snapshots delete {full_id}`",
            ) from None
        try:
            return ContextSnapshot.model_validate(orjson.loads(data))
        except (orjson.JSONDecodeError, ValidationError):
            raise SnapshotError(
                f"snapshot file {path} is damaged and cannot be restored",
                hint=f"delete it with `ollm snapshots delete {full_id}`",
            ) from None

    def restore_snapshot(self, snapshot_id: str) -> ActiveContext:
        """The active context captured by ``snapshot_id``, exactly."""
        context = self.get_snapshot(snapshot_id).to_context()
        logger.info("snapshot %s restored", snapshot_id)
        return context

    def delete_snapshot(self, snapshot_id: str) -> str:
        """Delete one snapshot (file, index entry, map entry); returns its full id."""
        with self._locked():
            full_id, session_id = self.resolve_id(snapshot_id)
            index = self._read_index(session_id)
            index.snapshots = [s for s in index.snapshots if s.id != full_id]
            self._snapshot_path(session_id, full_id).unlink(missing_ok=True)
            self._write_index(session_id, index)
            mapping = self._read_map()
            mapping.snapshots.pop(full_id, None)
            self._write_map(mapping)
        logger.info("snapshot %s of session %s deleted", full_id, session_id)
        return full_id

    def delete_session_snapshots(self, session_id: str) -> int:
        """Delete every snapshot of a session (and its restore override); returns how many."""
        folder = self.session_dir(session_id)
        with self._locked():
            mapping = self._read_map()
            ids = [sid for sid, owner in mapping.snapshots.items() if owner == session_id]
            count = max(len(ids), len(self._read_index(session_id).snapshots))
            shutil.rmtree(folder, ignore_errors=True)
            for sid in ids:
                mapping.snapshots.pop(sid, None)
            if ids:
                self._write_map(mapping)
        self._above.pop(session_id, None)
        if count:
            logger.info("deleted %d snapshots of session %s", count, session_id)
        return count

    def check_thresholds(
        self, current_tokens: int, max_tokens: int, *, session_id: str | None = None
    ) -> bool:
        """Whether an automatic snapshot should be taken now (usage at ``autoThreshold``).

        With ``session_id`` it answers True once per crossing: again only after
        usage fell back below the threshold (after a compression).
        """
        if not (self.settings.enabled and self.settings.auto_create) or max_tokens <= 0:
            return False
        above = current_tokens / max_tokens >= self.settings.auto_threshold
        if session_id is None:
            return above
        was_above = self._above.get(session_id, False)
        self._above[session_id] = above
        return above and not was_above

    # -- the restore override ---------------------------------------------------------

    def set_active_override(self, session_id: str, context: ActiveContext) -> Path:
        """Store ``context`` as what the session resumes with (``ollm snapshots restore``)."""
        folder = ensure_private_dir(self.session_dir(session_id))
        path = folder / OVERRIDE_FILE
        write_atomic(path, orjson.dumps(context.to_dict()))
        return path

    def take_active_override(self, session_id: str) -> ActiveContext | None:
        """The context stored by a restore, removed as it is taken (``None`` if none)."""
        path = self.session_dir(session_id) / OVERRIDE_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        path.unlink(missing_ok=True)
        try:
            return ActiveContext.model_validate(orjson.loads(data))
        except (orjson.JSONDecodeError, ValidationError):
            logger.warning(
                "the restored context %s is damaged; resuming from the session file instead", path
            )
            return None
