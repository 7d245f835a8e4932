"""Rescue files: records a full disk refused, kept elsewhere until they can be replayed.

When a store closes with journal records its disk refused (full, read-only),
they are written, as journal frames, to a rescue file in the first usable
folder of a list, preferring one on another filesystem than the sessions
folder (the one that is full). The next store of that folder that can write
replays them (see :class:`~ollm_cli.pipeline.recording._recovery.Recovery`).

Where (:func:`candidate_dirs`): the configured ``services.session.rescueDirs``,
then ``$XDG_RUNTIME_DIR/ollm-rescue`` (only when ``$XDG_RUNTIME_DIR`` is the
user's own folder, mode 0700), then ``OLLM_HOME/rescue`` and
``~/.cache/ollm/rescue``. A rescue file is only written in a folder owned by the
user that no one else may enter (made 0700 when missing); never in a folder of a fixed name
in a shared place such as ``/tmp`` or ``/dev/shm``, which another local user
could create first or fill with files of their own.

A rescue file is one header line followed by the frames of
:mod:`ollm_cli.pipeline.recording._journal`::

    OLLM-RESCUE 2 {"dataDir": "/home/u/.ollm/sessions", "digest": "<64 hex>"}\\n
    <frame><frame>...

``digest`` is HMAC-SHA256, keyed with the home's rescue key
(``OLLM_HOME/rescue.key``: 32 random bytes, mode 0600, made on first use), of
the ``dataDir`` bytes, a NUL byte and the frames. A file is replayed only when
it is a regular file owned by the user whose digest matches: anything else
(another user's file, a forged or altered one, a file of the old unkeyed
format) is *refused*: named to the user and by ``ollm sessions doctor``,
never replayed, left in place.

Example::

    key = rescue_key(create=True)
    path = write_rescue(data_dir, entries, key=key)
    scan = find_rescues(data_dir, key=key)
    for rescue in scan.found:
        entries = rescue.entries
    for refused in scan.refused:
        print(refused.path, refused.reason)
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ollm_cli.config.paths import (
    ensure_private_dir,
    ollm_home,
    private_dir_problem,
    runtime_dir,
)
from ollm_cli.pipeline.atomic_file import fsync_dir
from ollm_cli.pipeline.recording._journal import JournalEntry, encode_frame, scan_frames

logger = logging.getLogger(__name__)

HEADER_PREFIX = b"OLLM-RESCUE 2 "
OLD_HEADER_PREFIX = b"OLLM-RESCUE 1 "
SUFFIX = ".rescue"
KEY_NAME = "rescue.key"
KEY_BYTES = 32
MAX_RESCUE_BYTES = 1 << 30
"""A rescue file larger than this is not read (a full disk's leftovers are far smaller)."""


def _folder_key(data_dir: Path) -> str:
    import hashlib  # loads OpenSSL: 2 ms that a listing need not pay

    return hashlib.sha256(str(data_dir.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


# ------------------------------------------------------------------------ the key


def rescue_key(*, create: bool, home: Path | None = None) -> bytes | None:
    """The home's rescue key; made (32 random bytes, mode 0600) when missing and
    ``create``. ``None`` when there is none, or it is not this user's private file
    (then no rescue file can be trusted: each is refused, and named)."""
    path = (home or ollm_home()) / KEY_NAME
    key = _read_key(path)
    if key is not None or not create:
        return key
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or path.exists():
            # not ours, loose, or damaged: a new key; files signed with the old one
            # are refused (and named), never replayed on a key others may know
            logger.warning("the rescue key %s is not a private file of yours: replacing it", path)
            path.unlink()
    try:
        ensure_private_dir(path.parent)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError as exc:
        logger.warning("cannot create the rescue key %s: %s", path, exc.strerror)
        return _read_key(path)  # another process made it first
    key = secrets.token_bytes(KEY_BYTES)
    try:
        os.write(fd, key)
        os.fsync(fd)
    except OSError as exc:
        logger.warning("cannot write the rescue key %s: %s", path, exc.strerror)
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    finally:
        os.close(fd)
    return key


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & 0o077
            or info.st_size != KEY_BYTES
        ):
            return None
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == KEY_BYTES else None


def _digest(key: bytes, data_dir: str, frames: bytes) -> str:
    mac = hmac.new(key, data_dir.encode("utf-8", "surrogatepass") + b"\0", "sha256")
    mac.update(frames)
    return mac.hexdigest()


# -------------------------------------------------------------------- the folders


def default_rescue_dirs() -> list[Path]:
    """The folders tried after the configured ones, in order: each private to the user."""
    found: list[Path] = []
    runtime = runtime_dir()
    if runtime is not None:
        found.append(runtime / "ollm-rescue")
    found.append(ollm_home() / "rescue")
    found.append(Path.home() / ".cache" / "ollm" / "rescue")
    return found


def _device(path: Path) -> int | None:
    """The device of ``path``, or of its nearest existing parent."""
    for candidate in (path, *path.parents):
        try:
            return candidate.stat().st_dev
        except OSError:
            continue
    return None


def candidate_dirs(data_dir: Path, extra_dirs: Iterable[Path]) -> list[Path]:
    """Where a rescue file of ``data_dir`` may go: other filesystems first."""
    here = _device(data_dir)
    seen: list[Path] = []
    for folder in (*extra_dirs, *default_rescue_dirs()):
        folder = folder.expanduser()
        if folder not in seen:
            seen.append(folder)
    other = [f for f in seen if _device(f) != here]
    same = [f for f in seen if _device(f) == here]
    return other + same


def _usable_folder(folder: Path) -> str | None:
    """Make ``folder`` (0700) when missing, and say why it cannot hold a rescue file, if
    it cannot (a folder that exists keeps its mode: ``/tmp`` is never made private)."""
    if not os.path.lexists(folder):
        try:
            ensure_private_dir(folder)
        except OSError as exc:
            return f"cannot be created ({exc.strerror})"
    return private_dir_problem(folder)


# ------------------------------------------------------------------------ writing


def write_rescue(
    data_dir: Path,
    entries: list[JournalEntry],
    *,
    key: bytes | None,
    extra_dirs: Iterable[Path] = (),
) -> Path | None:
    """Write ``entries`` to a new rescue file; its path, or None when no folder took it.

    Without a key the file is still written, for the user to read, but it will be
    refused at replay (nothing vouches for it)."""
    if not entries:
        return None
    where = str(data_dir.resolve())
    frames = b"".join(encode_frame(entry) for entry in entries)
    digest = _digest(key, where, frames) if key is not None else ""
    header = HEADER_PREFIX + orjson.dumps({"dataDir": where, "digest": digest}) + b"\n"
    data = header + frames
    name = f"{_folder_key(data_dir)}-{time.time_ns():020d}-{os.getpid()}{SUFFIX}"
    for folder in candidate_dirs(data_dir, extra_dirs):
        problem = _usable_folder(folder)
        if problem is not None:
            logger.warning("not writing a rescue file in %s: the folder %s", folder, problem)
            continue
        target = folder / name
        temp = folder / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temp, target)
            fsync_dir(folder)
        except OSError as exc:
            logger.warning("cannot write a rescue file in %s: %s", folder, exc.strerror)
            with contextlib.suppress(OSError):
                temp.unlink()
            continue
        logger.error("%d unsaved record(s) written to the rescue file %s", len(entries), target)
        return target
    return None


# ------------------------------------------------------------------------ reading


@dataclass
class RescueFile:
    """A rescue file of one sessions folder, and the records it holds."""

    path: Path
    entries: list[JournalEntry]

    def discard(self) -> None:
        """Delete the file: its records are in their sessions now."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass(frozen=True)
class RefusedRescue:
    """A file named like a rescue file of this sessions folder that is not replayed."""

    path: Path
    reason: str


@dataclass
class RescueScan:
    """The rescue files of a sessions folder: those to replay (oldest first), and
    those refused."""

    found: list[RescueFile] = field(default_factory=list)
    refused: list[RefusedRescue] = field(default_factory=list)


def find_rescues(
    data_dir: Path, *, key: bytes | None, extra_dirs: Iterable[Path] = ()
) -> RescueScan:
    """The rescue files written for ``data_dir`` by this user with this home's key."""
    prefix = _folder_key(data_dir)
    scan = RescueScan()
    for folder in candidate_dirs(data_dir, extra_dirs):
        try:
            names = sorted(
                n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(SUFFIX)
            )
        except OSError:
            continue
        for name in names:
            path = folder / name
            outcome = _read_rescue(path, str(data_dir.resolve()), key)
            if isinstance(outcome, RescueFile):
                scan.found.append(outcome)
            elif outcome is not None:
                logger.warning("rescue file %s refused: %s", path, outcome)
                scan.refused.append(RefusedRescue(path, outcome))
    scan.found.sort(key=lambda rescue: rescue.path.name)
    return scan


def _read_rescue(path: Path, data_dir: str, key: bytes | None) -> RescueFile | str | None:
    """The rescue file at ``path``, or why it is refused (``None``: gone meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be opened ({exc.strerror}; a symbolic link is never followed)"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "it is not a regular file"
        if info.st_uid != os.getuid():
            return f"it belongs to another user (uid {info.st_uid}), not to you"
        if info.st_size > MAX_RESCUE_BYTES:
            return f"it is too large ({info.st_size} bytes)"
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(MAX_RESCUE_BYTES + 1)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    line_end = raw.find(b"\n")
    if raw.startswith(OLD_HEADER_PREFIX):
        return "it has no digest (written by an older OLLM, or by someone else)"
    if not raw.startswith(HEADER_PREFIX) or line_end < 0:
        return "it is not a rescue file"
    try:
        header = orjson.loads(raw[len(HEADER_PREFIX) : line_end])
    except orjson.JSONDecodeError:
        return "its header is damaged"
    if not isinstance(header, dict) or header.get("dataDir") != data_dir:
        return "it names another sessions folder"
    frames = raw[line_end + 1 :]
    digest = header.get("digest")
    if key is None:
        return "there is no rescue key in your OLLM home to check it with"
    if not isinstance(digest, str) or not hmac.compare_digest(
        digest, _digest(key, data_dir, frames)
    ):
        return "its digest does not match (forged, altered, or signed with another key)"
    return RescueFile(path, scan_frames(frames).entries)
