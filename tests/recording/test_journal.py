"""The session journal: self-checking frames, group commit, rotation, retries."""

from __future__ import annotations

import errno
import os
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.recording._journal import (
    HEADER,
    JournalEntry,
    SessionJournal,
    Ticket,
    claim_dead_logs,
    encode_frame,
    entries_for,
    log_files,
    read_log,
    scan_frames,
)

entries = st.lists(
    st.builds(
        JournalEntry,
        session_id=st.uuids().map(str),
        epoch=st.integers(0, 2**63 - 1),
        seq=st.integers(0, 2**63 - 1),
        payload=st.binary(max_size=64),
    ),
    max_size=6,
)


@given(written=entries, cut=st.integers(0, 10_000))
def test_frames_read_back_exactly_and_a_torn_tail_is_dropped(
    written: list[JournalEntry], cut: int
) -> None:
    data = b"".join(encode_frame(e) for e in written)
    assert scan_frames(data).entries == written
    assert scan_frames(data).torn_bytes == 0
    cut %= len(data) + 1
    torn = scan_frames(data[:cut])
    assert torn.entries == written[: len(torn.entries)]
    assert torn.valid_bytes + torn.torn_bytes == cut
    assert torn.valid_bytes == sum(len(encode_frame(e)) for e in torn.entries)


def test_a_flipped_bit_anywhere_in_a_frame_is_detected() -> None:
    entry = JournalEntry(str(uuid.uuid4()), 3, 4, b'{"m": "hello"}')
    frame = encode_frame(entry)
    for position in range(len(frame)):
        damaged = bytearray(frame)
        damaged[position] ^= 0x10
        assert scan_frames(bytes(damaged)).entries == [], position


def test_only_keeps_the_entries_of_one_session(tmp_path: Path) -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    log = tmp_path / "x.wal"
    log.write_bytes(
        b"".join(encode_frame(JournalEntry(s, 1, n, b"p")) for n, s in enumerate([a, b, a]))
    )
    assert [e.seq for e in read_log(log, a).entries] == [0, 2]
    assert read_log(tmp_path / "missing.wal").entries == []
    assert [e.seq for e in entries_for(tmp_path, b)] == [1]
    assert entries_for(tmp_path / "nowhere", b) == []


def test_many_writers_share_fsyncs(tmp_path: Path) -> None:
    journal = SessionJournal(tmp_path / "j", group_commit_ms=2.0)
    writers, each = 16, 25
    start = threading.Barrier(writers)

    def write(n: int) -> None:
        sid = str(uuid.UUID(int=n + 1))
        start.wait()
        for seq in range(1, each + 1):
            assert journal.wait(journal.submit(JournalEntry(sid, 7, seq, b"x" * 50)))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert journal.batches < writers * each  # fewer fsyncs than records
    [log] = log_files(tmp_path / "j")
    found = read_log(log).entries
    assert len(found) == writers * each
    for n in range(writers):  # each writer's records in its order
        mine = [e.seq for e in found if e.session_id == str(uuid.UUID(int=n + 1))]
        assert mine == list(range(1, each + 1))
    assert journal.close()
    assert log_files(tmp_path / "j") == [log], "unsaved entries keep the log"


def test_a_lone_session_never_waits_for_company(tmp_path: Path) -> None:
    # a batch of two entries of one session (usage riding with an answer) is no
    # sign of other writers: the next record goes at once, not after the window
    # (a window of an hour: a record that waited for it would never be acknowledged
    # here; how long the records take is bench/sessions.py's figure, not this test's)
    journal = SessionJournal(tmp_path / "j", group_commit_ms=3_600_000.0)
    sid = str(uuid.uuid4())
    journal.submit(JournalEntry(sid, 1, 1, b"usage"))
    assert journal.wait(journal.submit(JournalEntry(sid, 1, 2, b"answer")))
    acknowledged: list[bool] = []

    def record() -> None:
        for seq in range(3, 8):
            acknowledged.append(journal.wait(journal.submit(JournalEntry(sid, 1, seq, b"next"))))

    writer = threading.Thread(target=record)
    writer.start()
    writer.join(120)
    waited = writer.is_alive()
    assert journal.close()  # also ends a gather that waited
    writer.join()
    assert not waited, "a lone session's record waited for the group-commit window"
    assert acknowledged == [True] * 5


def test_a_log_is_locked_while_live_and_claimed_once_dead(tmp_path: Path) -> None:
    journal = SessionJournal(tmp_path)
    sid = str(uuid.uuid4())
    journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"a")))
    assert list(claim_dead_logs(tmp_path)) == []  # live: its writer holds the lock
    journal.close()
    [dead] = list(claim_dead_logs(tmp_path))
    assert [e.seq for e in dead.scan.entries] == [1]
    assert list(claim_dead_logs(tmp_path)) == []  # claimed: locked by us now
    dead.release()
    [again] = list(claim_dead_logs(tmp_path))
    again.discard()
    again.discard()
    assert log_files(tmp_path) == []


def test_logs_rotate_and_are_deleted_once_saved(tmp_path: Path) -> None:
    journal = SessionJournal(tmp_path, rotate_bytes=2000, reset_bytes=500)
    sid = str(uuid.uuid4())
    for seq in range(1, 41):
        journal.wait(journal.submit(JournalEntry(sid, 5, seq, b"y" * 100)))
    assert len(log_files(tmp_path)) > 1
    assert sorted(e.seq for e in entries_for(tmp_path, sid)) == list(range(1, 41))
    journal.mark_saved(sid, 5, 40)
    assert len(log_files(tmp_path)) == 1  # retired logs are gone, the current one stays
    journal.wait(journal.submit(JournalEntry(sid, 5, 41, b"z")))  # saved and big: a fresh log
    assert [e.seq for e in entries_for(tmp_path, sid)] == [41]
    journal.forget(sid)
    assert journal.close()
    assert log_files(tmp_path) == []


def test_what_was_saved_is_not_kept_for_sessions_no_log_holds(tmp_path: Path) -> None:
    # a service's store is open for days: one entry per session ever saved would grow
    journal = SessionJournal(tmp_path, rotate_bytes=2000, reset_bytes=500)
    for _ in range(200):
        sid = str(uuid.uuid4())
        journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"x" * 100)))
        journal.mark_saved(sid, 1, 1)
    assert journal.tracked_sessions < 40
    unsaved = str(uuid.uuid4())
    journal.wait(journal.submit(JournalEntry(unsaved, 1, 1, b"u" * 3000)))
    for _ in range(20):  # rotations while `unsaved` is still only in the journal
        sid = str(uuid.uuid4())
        journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"x" * 300)))
        journal.mark_saved(sid, 1, 1)
    assert [e.seq for e in entries_for(tmp_path, unsaved)] == [1]  # its log is kept
    journal.mark_saved(unsaved, 1, 1)
    assert journal.close()
    assert log_files(tmp_path) == []


def test_a_failed_write_is_kept_retried_and_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = SessionJournal(tmp_path)
    sid = str(uuid.uuid4())
    real = os.fdatasync
    failing = {"on": True}

    def fdatasync(fd: int) -> None:
        if failing["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    assert not journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"first")))
    assert journal.pending == 1 and "No space left" in (journal.last_error or "")
    assert not journal.flush()  # still failing: nothing written
    failing["on"] = False
    assert journal.flush()
    assert journal.pending == 0 and journal.last_error is None
    assert [e.payload for e in entries_for(tmp_path, sid)] == [b"first"]
    assert journal.flush()  # nothing pending
    journal.close()
    with pytest.raises(RuntimeError, match="closed"):
        journal.submit(JournalEntry(sid, 1, 2, b"late"))


def test_closing_with_unwritable_entries_reports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = SessionJournal(tmp_path)
    sid = str(uuid.uuid4())

    def fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"lost")))
    assert journal.close() is False


def test_a_journal_folder_that_cannot_be_created_is_a_failed_write(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    journal = SessionJournal(tmp_path / "file" / "journal")
    sid = str(uuid.uuid4())
    assert not journal.wait(journal.submit(JournalEntry(sid, 1, 1, b"x")))
    assert journal.pending == 1 and journal.last_error
    journal.close()


def test_header_layout_is_stable() -> None:
    assert HEADER.size == 42


def test_entries_tried_again_stay_pending_until_written(tmp_path: Path) -> None:
    """While the flusher tries a refused batch again, the store's health still counts
    it: the chat asks at each prompt, and a retry in flight once read as all saved."""
    journal = SessionJournal(tmp_path)
    write = journal._write
    tries: list[int] = []
    retrying, release = threading.Event(), threading.Event()

    def refused_then_held(batch: list[tuple[Ticket, JournalEntry]], rotate: bool) -> bool:
        tries.append(len(batch))
        if len(tries) == 1:
            return False  # the disk refused the first try
        retrying.set()
        assert release.wait(30)
        return write(batch, rotate)

    journal._write = refused_then_held  # type: ignore[method-assign]
    assert not journal.wait(journal.submit(JournalEntry(str(uuid.uuid4()), 1, 1, b"kept")))
    assert journal.pending == 1
    assert retrying.wait(30)  # the retry's timer fired: the batch is being written again
    assert journal.pending == 1  # before: 0 while the retry was in flight
    release.set()
    assert journal.flush()
    assert journal.pending == 0 and tries == [1, 1]
    journal.close()
