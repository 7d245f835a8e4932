"""Recovery: what a store does about damage, dead processes and full disks.

- A session file that does not parse is moved aside (``*.corrupt-<timestamp>``),
  reported, and rebuilt from the journal when the journal holds the whole session.
- The journal of a process that died is folded into its sessions by the next
  store that opens the folder (:meth:`Recovery.recover_dead_logs`).
- Rescue files (:mod:`ollm_cli.pipeline.recording._rescue`): when a store closes
  with journal records its disk refused (full, read-only), they would be gone
  with the process. They are written instead to a rescue file in a private
  folder, preferring one on another filesystem. The next store of that folder
  that can write replays them into their sessions (in order, once: a record the
  session already holds is skipped) and deletes the rescue file; a file another
  user owns, or whose keyed digest does not match, is refused and named.
- ``ollm sessions doctor`` (:meth:`Recovery.doctor`) finds all of these and,
  with ``--fix``, repairs them.

Example::

    recovery = Recovery(folder, journal, index, sessions, damaged)
    for finding in recovery.doctor(fix=False):
        print(finding.kind, finding.subject, finding.detail)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
from pathlib import Path

from pydantic import ValidationError

from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.errors import (
    SessionCorruptError,
    SessionError,
    SessionLockedError,
    StorageError,
)
from ollm_cli.pipeline.recording._document import DocumentError, SessionDocument
from ollm_cli.pipeline.recording._ids import session_id_of_file
from ollm_cli.pipeline.recording._index import SessionIndex, SessionView, file_sig
from ollm_cli.pipeline.recording._journal import (
    JournalEntry,
    SessionJournal,
    claim_dead_logs,
    describe_damage,
    entries_for,
    log_files,
    read_log,
)
from ollm_cli.pipeline.recording._lock import lock_holder
from ollm_cli.pipeline.recording._rescue import (
    RefusedRescue,
    RescueScan,
    find_rescues,
    rescue_key,
    write_rescue,
)
from ollm_cli.pipeline.recording._sessions import (
    CORRUPT_MARK,
    DamagedFiles,
    OpenSessions,
    SessionFolder,
    invalid_reason,
    os_reason,
    rebuild_from_journal,
    replay,
)
from ollm_cli.pipeline.records import CloseReport, Record

logger = logging.getLogger(__name__)


class DoctorFinding(Record):
    """One problem ``ollm sessions doctor`` found: its kind, what it is, whether fixed."""

    kind: str
    subject: str
    detail: str
    fixed: bool = False


class Recovery:
    """The store's repairs: damaged files, dead journals, rescue files and the doctor.

    It works on the store's folder, journal, index and open sessions (the parts of
    :mod:`ollm_cli.pipeline.recording._sessions`); the store calls it and keeps its
    public methods.
    """

    def __init__(
        self,
        folder: SessionFolder,
        journal: SessionJournal,
        index: SessionIndex,
        sessions: OpenSessions,
        damaged: DamagedFiles,
    ) -> None:
        self.folder = folder
        self.journal = journal
        self.index = index
        self.sessions = sessions
        self.damaged = damaged
        self._key: bytes | None = None

    def _rescue_key(self) -> bytes | None:
        """The home's rescue key (made by a store that can write, on first need)."""
        if self._key is None:
            self._key = rescue_key(create=not self.folder.read_only)
        return self._key

    def _rescues(self) -> RescueScan:
        return find_rescues(
            self.folder.data_dir,
            key=self._rescue_key(),
            extra_dirs=self.folder.settings.rescue_dirs,
        )

    def _refused(self, refused: RefusedRescue) -> None:
        message = (
            f"rescue file {refused.path} refused, not replayed: {refused.reason}; "
            "delete it if you did not write it"
        )
        if message not in self.folder.notices:
            self.folder.notices.append(message)

    def rescue_unsaved(self) -> CloseReport:
        unsaved = self.journal.unsaved()
        if not unsaved:
            return CloseReport(ok=True)
        error = self.journal.last_error or next(iter(self.sessions.save_errors.values()), None)
        path = write_rescue(
            self.folder.data_dir,
            unsaved,
            key=self._rescue_key(),
            extra_dirs=self.folder.settings.rescue_dirs,
        )
        if path is None:
            logger.error(
                "%d record(s) could not be written anywhere and are lost: %s", len(unsaved), error
            )
        return CloseReport(
            ok=False,
            unsaved_records=len(unsaved),
            sessions=sorted({entry.session_id for entry in unsaved}),
            rescue_file=str(path) if path else None,
            error=error,
        )

    def replay_rescues(self) -> None:
        """Bring the records of rescue files (written when this folder's disk was full)
        into their sessions; a rescue file is deleted once all of it is in."""
        try:
            scan = self._rescues()
        except OSError:  # pragma: no cover - listing the rescue folders failed
            return
        for refused in scan.refused:
            self._refused(refused)
        for rescue in scan.found:
            done = True
            sessions = sorted({e.session_id for e in rescue.entries})
            for sid in sessions:
                done = self._replay_rescued(sid, rescue.entries) and done
            if done:
                rescue.discard()
                message = (
                    f"replayed {len(rescue.entries)} record(s) of {len(sessions)} session(s) "
                    f"from the rescue file {rescue.path}"
                )
                logger.warning(message)
                self.folder.notices.append(message)
                self.folder.recovery_report.append(message)

    def _replay_rescued(self, sid: str, entries: list[JournalEntry]) -> bool:
        mine = [e for e in entries if e.session_id == sid]
        if not self.folder.path(sid).exists():
            doc = rebuild_from_journal(sid, [*entries_for(self.folder.journal_dir, sid), *mine])
            if doc is None:
                return True  # deleted meanwhile, or never created: nothing to bring back
            try:
                write_atomic(self.folder.path(sid), doc.encode())
            except OSError:
                return False
            return True
        try:
            lock = self.folder.lock(sid)
        except SessionError:
            return False  # in use: the next command replays it
        try:
            doc, file_seq = self.sessions.load(sid)
            before = doc.seq
            replay(doc, mine)
            if doc.seq != file_seq:
                write_atomic(self.folder.path(sid), doc.encode())
                self.index.update(sid, SessionView(doc), file_sig(self.folder.path(sid)))
                logger.info("session %s: %d rescued record(s) replayed", sid, doc.seq - before)
            return True
        except (SessionError, OSError) as exc:
            logger.warning("could not replay rescued records into session %s: %s", sid, exc)
            return False
        finally:
            lock.release()

    def doctor(self, *, fix: bool = False) -> list[DoctorFinding]:
        """Check the folder: damaged session files, orphaned journals, stale locks,
        index drift, rescue files waiting. With ``fix`` (a writable store) repair
        them: what a writable store folded or replayed when it opened is reported
        as fixed too. Nothing is changed without ``fix``."""
        if fix:
            self.folder.check_open()
        findings = [
            DoctorFinding(
                kind="recovered", subject=str(self.folder.data_dir), detail=line, fixed=True
            )
            for line in self.folder.recovery_report
        ]
        findings += self._doctor_files(fix)
        findings += self._doctor_journals()
        findings += self._doctor_locks(fix)
        findings += self._doctor_index(fix)
        scan = self._rescues()
        for refused in scan.refused:
            findings.append(
                DoctorFinding(
                    kind="rescue-refused",
                    subject=str(refused.path),
                    detail=f"named like a rescue file of this folder but never replayed: "
                    f"{refused.reason}; delete it if you did not write it",
                )
            )
        for rescue in scan.found:
            findings.append(
                DoctorFinding(
                    kind="rescue-file",
                    subject=str(rescue.path),
                    detail=f"{len(rescue.entries)} record(s) written when the disk refused "
                    "them, not replayed yet (a session in use, or the disk still refuses)",
                )
            )
        return findings

    def _doctor_files(self, fix: bool) -> list[DoctorFinding]:
        found: list[DoctorFinding] = []
        try:
            names = sorted(os.listdir(self.folder.data_dir))
        except OSError:
            return found
        for name in names:
            path = self.folder.data_dir / name
            if CORRUPT_MARK in name and name.split(CORRUPT_MARK)[0].endswith(".json"):
                found.append(
                    DoctorFinding(
                        kind="quarantined",
                        subject=name,
                        detail="a damaged file moved aside earlier; kept for inspection "
                        "(delete it when you no longer need it)",
                    )
                )
                continue
            sid = session_id_of_file(name)
            if sid is None:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                finding = DoctorFinding(
                    kind="not-a-file",
                    subject=name,
                    detail="named like a session but not a regular file",
                )
                if fix:
                    finding.fixed = (
                        self.damaged.move_aside(sid, path, "not a regular file") is not None
                    )
                found.append(finding)
                continue
            corrupt = self._doctor_session_file(sid, path, fix)
            if corrupt is not None:
                found.append(corrupt)
        return found

    def _doctor_session_file(self, sid: str, path: Path, fix: bool) -> DoctorFinding | None:
        """A finding if the session's file does not read as a valid session; with
        ``fix`` (the session not in use) it is moved aside and rebuilt from the journal."""
        problem = None
        try:
            doc = SessionDocument.decode(path.read_bytes(), sid)
            doc.to_session()
        except DocumentError as exc:
            problem = str(exc)
        except ValidationError as exc:
            problem = invalid_reason(exc)
        except OSError as exc:
            problem = f"cannot be read: {os_reason(exc)}"
        if problem is None:
            return None
        finding = DoctorFinding(kind="corrupt", subject=path.name, detail=problem)
        if fix and sid not in self.sessions and lock_holder(self.folder.lock_path(sid)) is None:
            try:
                rebuilt = self.damaged.handle_corrupt(sid, path, problem)
                write_atomic(path, rebuilt.encode())
                finding.detail += (
                    f"; moved aside and rebuilt from the journal ({len(rebuilt.messages)} messages)"
                )
            except SessionCorruptError:
                finding.detail += "; moved aside (the journal does not hold it)"
            except OSError as exc:
                finding.detail += f"; could not rebuild it: {os_reason(exc)}"
            finding.fixed = True
        return finding

    def _doctor_journals(self) -> list[DoctorFinding]:
        found: list[DoctorFinding] = []
        for path in log_files(self.folder.journal_dir):
            if self.journal.owns(path):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer's journal
            finally:
                os.close(fd)
            scan = read_log(path)
            damage = describe_damage(path.name, scan)
            found.append(
                DoctorFinding(
                    kind="orphaned-journal",
                    subject=path.name,
                    detail=f"the journal of a process that stopped: {len(scan.entries)} "
                    "record(s) not folded into their sessions yet"
                    + ("; " + "; ".join(damage) if damage else ""),
                )
            )
        return found

    def _doctor_locks(self, fix: bool) -> list[DoctorFinding]:
        found: list[DoctorFinding] = []
        try:
            names = sorted(os.listdir(self.folder.locks_dir))
        except OSError:
            return found
        for name in names:
            path = self.folder.locks_dir / name
            if not name.endswith(".lock") or lock_holder(path) is not None:
                continue
            finding = DoctorFinding(
                kind="stale-lock", subject=name, detail="a lock file no process holds"
            )
            if fix:
                try:
                    path.unlink()
                    finding.fixed = True
                except OSError as exc:
                    finding.detail += f"; cannot delete it: {os_reason(exc)}"
            found.append(finding)
        return found

    def _doctor_index(self, fix: bool) -> list[DoctorFinding]:
        changed, removed = self.index.drift()
        if not changed and not removed:
            return []
        finding = DoctorFinding(
            kind="index-drift",
            subject=str(self.folder.data_dir / ".index"),
            detail=f"{len(changed)} session file(s) new or changed since indexed, "
            f"{len(removed)} indexed session(s) whose file is gone",
        )
        if fix:
            self.index.rebuild()
            finding.fixed = True
        return [finding]

    def on_corrupt_file(self, sid: str, path: Path, problem: str) -> None:
        """The index met a file that does not parse: handle it without breaking the listing."""
        if self.folder.read_only:
            message = (
                f"session file {path.name} is damaged ({problem}); left as it is "
                "(`ollm sessions doctor --fix` repairs it)"
            )
            logger.warning(message)
            if message not in self.folder.notices:
                self.folder.notices.append(message)
            return
        state = self.sessions.get(sid)
        if state is not None:
            self.damaged.move_aside(sid, path, problem)
            with state.lock:
                state.saved_seq = -1
            self.sessions.save(state)
            return
        try:
            doc = self.damaged.handle_corrupt(sid, path, problem)
        except SessionCorruptError as exc:
            logger.warning("%s", exc.message)
            return
        if lock_holder(self.folder.lock_path(sid)) is None:
            with contextlib.suppress(OSError):
                write_atomic(path, doc.encode())

    def recover_dead_logs(self) -> None:
        """Fold the journals of stores that died into their sessions, then delete them."""
        if not self.folder.journal_dir.is_dir():
            return
        for dead in claim_dead_logs(self.folder.journal_dir):
            try:
                for message in describe_damage(dead.path.name, dead.scan):
                    logger.warning(message)
                    self.folder.recovery_report.append(message)
                done = True
                for sid in sorted({e.session_id for e in dead.scan.entries}):
                    done = self._fold(sid) and done
            except Exception:  # pragma: no cover - keep the store usable whatever happens
                logger.exception("could not fold journal %s", dead.path.name)
                done = False
            if done:
                dead.discard()
            else:
                dead.release()

    def _fold(self, sid: str) -> bool:
        """Bring ``sid``'s file up to date with the journals; False if it must wait."""
        path = self.folder.path(sid)
        if not path.exists() and not self.damaged.has_copy(sid):
            return True  # deleted: nothing to bring back
        try:
            lock = self.folder.lock(sid)
        except SessionLockedError:
            return False
        except StorageError:
            return False
        try:
            if not path.exists():
                doc = rebuild_from_journal(sid, entries_for(self.folder.journal_dir, sid))
                if doc is not None:
                    write_atomic(path, doc.encode())
                    self.folder.recovery_report.append(
                        f"session {sid} was rebuilt from its journal"
                    )
                return True
            doc, file_seq = self.sessions.load(sid)
            if doc.seq != file_seq:
                write_atomic(path, doc.encode())
                logger.info("session %s: %d journaled record(s) folded in", sid, doc.seq - file_seq)
            return True
        except (SessionError, OSError) as exc:
            logger.warning("could not fold the journal into session %s: %s", sid, exc)
            return False
        finally:
            lock.release()
