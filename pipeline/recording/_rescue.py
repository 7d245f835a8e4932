"""Rescue files: records a store could not write to its folder, kept elsewhere.

When a store closes with journal records its disk refused (full, read-only),
they would be gone with the process. They are written instead, as journal
frames, to a rescue file in the first writable folder of a list, preferring
one on another filesystem than the sessions folder (the one that is full).
The next store of that folder that can write replays them into their
sessions (in order, once: a record the session already holds is skipped) and
deletes the rescue file.

A rescue file is one header line (``OLLM-RESCUE 1 {json}``, naming the
sessions folder) followed by the frames of :mod:`ollm_cli.pipeline.recording._journal`.

Example::

    path = write_rescue(data_dir, entries, extra_dirs=[])
    for rescue in find_rescues(data_dir, extra_dirs=[]):
        entries = rescue.entries
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from ollm_cli.pipeline.atomic_file import fsync_dir
from ollm_cli.pipeline.recording._journal import JournalEntry, encode_frame, scan_frames

logger = logging.getLogger(__name__)

HEADER_PREFIX = b"OLLM-RESCUE 1 "
SUFFIX = ".rescue"


def _folder_key(data_dir: Path) -> str:
    return hashlib.sha256(str(data_dir.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def default_rescue_dirs() -> list[Path]:
    """The folders tried after the configured ones, in order."""
    uid = os.getuid()
    found: list[Path] = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        found.append(Path(runtime) / "ollm-rescue")
    found.append(Path("/dev/shm") / f"ollm-rescue-{uid}")
    found.append(Path(tempfile.gettempdir()) / f"ollm-rescue-{uid}")
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


def write_rescue(
    data_dir: Path, entries: list[JournalEntry], *, extra_dirs: Iterable[Path] = ()
) -> Path | None:
    """Write ``entries`` to a new rescue file; its path, or None when no folder took it."""
    if not entries:
        return None
    header = HEADER_PREFIX + orjson.dumps({"dataDir": str(data_dir.resolve())}) + b"\n"
    data = header + b"".join(encode_frame(entry) for entry in entries)
    name = f"{_folder_key(data_dir)}-{time.time_ns():020d}-{os.getpid()}{SUFFIX}"
    for folder in candidate_dirs(data_dir, extra_dirs):
        target = folder / name
        temp = folder / f".{name}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
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


@dataclass
class RescueFile:
    """A rescue file of one sessions folder, and the records it holds."""

    path: Path
    entries: list[JournalEntry]

    def discard(self) -> None:
        """Delete the file: its records are in their sessions now."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def find_rescues(data_dir: Path, *, extra_dirs: Iterable[Path] = ()) -> list[RescueFile]:
    """The rescue files written for ``data_dir``, oldest first."""
    key = _folder_key(data_dir)
    found: list[RescueFile] = []
    for folder in candidate_dirs(data_dir, extra_dirs):
        try:
            names = sorted(
                n for n in os.listdir(folder) if n.startswith(key) and n.endswith(SUFFIX)
            )
        except OSError:
            continue
        for name in names:
            path = folder / name
            try:
                if not path.is_file():
                    continue
                raw = path.read_bytes()
            except OSError:
                continue
            line_end = raw.find(b"\n")
            if not raw.startswith(HEADER_PREFIX) or line_end < 0:
                logger.warning("%s is not a rescue file; left alone", path)
                continue
            found.append(RescueFile(path, scan_frames(raw[line_end + 1 :]).entries))
    found.sort(key=lambda rescue: rescue.path.name)
    return found
