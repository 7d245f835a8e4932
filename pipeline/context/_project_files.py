"""Reading the project files (``OLLM.md``) into the prompt, never through a link.

A tool call may write the workspace's ``OLLM.md``, and what it writes goes into
the system prompt of the next request. It may also make it a symbolic link to
what the sandbox hides (``OLLM_HOME/service/token``, ``~/.ssh/id_*``,
``/proc/self/environ``) or a FIFO that never ends. So a project file is read:

- relative to an open descriptor of its folder, its name opened with
  ``O_NOFOLLOW`` (a symbolic link is refused, never followed) and
  ``O_NONBLOCK`` (a FIFO cannot hold the open);
- only when what was opened is a regular file on the folder's own filesystem
  (no FIFO, socket, device or directory, no file of ``/proc``);
- up to :data:`MAX_PROJECT_FILE_BYTES` (the read stops there, so a file that
  grows while it is read cannot make it read more), and only as UTF-8.

A refused file is not read and :attr:`ProjectFile.notice` says why (the chat
prints it). A file that was read has a sha256 ``digest``:
:class:`ProjectFileDigests` keeps the digest each session (and the last session
of all) saw, so a file changed since then, by a tool or anyone, is named.

Example::

    read = read_project_file(Path("/work/project"), "OLLM.md")
    read.text       # the content, or None
    read.notice     # "/work/project/OLLM.md is a symbolic link: not read ..." or None
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.atomic_file import write_atomic

logger = logging.getLogger(__name__)

#: A project file larger than this is not loaded (a notice says so).
MAX_PROJECT_FILE_BYTES = 1024 * 1024
#: How many sessions' digests :class:`ProjectFileDigests` keeps (the oldest go first).
MAX_SESSIONS_KEPT = 500

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


@dataclass(frozen=True)
class ProjectFile:
    """What reading one project file gave: its ``text`` (``None`` when there is
    none to use), the sha256 ``digest`` of its bytes, and a ``notice`` for the user
    when the file exists but was refused."""

    path: str
    text: str | None = None
    digest: str | None = None
    notice: str | None = None


def _refused(path: str, why: str) -> ProjectFile:
    notice = f"{path} {why}: not read into the prompt"
    logger.warning("context: %s", notice)
    return ProjectFile(path, notice=notice)


def read_project_file(
    folder: Path, name: str, max_bytes: int = MAX_PROJECT_FILE_BYTES
) -> ProjectFile:
    """Read ``folder/name`` as the module says (``name`` is one path component)."""
    path = str(folder / name)
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return ProjectFile(path)  # no folder (an OLLM home never made): no file
    try:
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=folder_fd)
        except FileNotFoundError:
            return ProjectFile(path)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return _refused(path, "is a symbolic link (context files are never followed)")
            return _refused(path, f"cannot be opened ({error.strerror or 'error'})")
        try:
            return _read_open(path, fd, os.fstat(folder_fd).st_dev, max_bytes)
        finally:
            os.close(fd)
    finally:
        os.close(folder_fd)


def _read_open(path: str, fd: int, folder_dev: int, max_bytes: int) -> ProjectFile:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        kind = next((what for test, what in _KINDS if test(info.st_mode)), "not a regular file")
        if kind == "a directory":
            return ProjectFile(path)  # a folder named OLLM.md: nothing to read, nothing amiss
        return _refused(path, f"is {kind}, not a regular file")
    if info.st_dev != folder_dev:
        return _refused(path, "is on another filesystem than its folder (mounted over it)")
    if info.st_size > max_bytes:
        return _refused(path, f"is {info.st_size} bytes, over the {max_bytes}-byte limit")
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        return _refused(path, f"cannot be read ({error.strerror or 'error'})")
    if size > max_bytes:
        return _refused(path, f"grew over the {max_bytes}-byte limit while it was read")
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _refused(path, "is not UTF-8 text")
    digest = hashlib.sha256(data).hexdigest()
    return ProjectFile(path, text if text.strip() else None, digest)


class _Seen(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    last: dict[str, str] = Field(default_factory=dict)
    """path -> digest (``""``: there was no file), as the last session saw it."""
    sessions: dict[str, dict[str, str]] = Field(default_factory=dict)
    """session id -> path -> digest, as that session last saw it (oldest first)."""


class ProjectFileDigests:
    """The digests of the project files as sessions saw them, in one JSON file
    (``<dataDir>/.context/project-files.json``, 0600)::

        {"last": {"/work/p/OLLM.md": "<sha256>"},
         "sessions": {"<sessionId>": {"/work/p/OLLM.md": "<sha256>"}}}
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> _Seen:
        try:
            return _Seen.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return _Seen()
        except (OSError, ValidationError) as error:
            logger.warning(
                "context: %s is unreadable (%s); file changes are checked from now on",
                self.path,
                type(error).__name__,
            )
            return _Seen()

    def changed(self, session_id: str, digests: dict[str, str]) -> list[str]:
        """The paths of ``digests`` (path -> digest read now, ``""`` for a file that
        is not there) whose digest differs from the one this session saw last (a
        new session: the last session of all), a file that appeared included; then
        remember ``digests`` as seen. A path never seen before is not named."""
        seen = self._load()
        before = seen.sessions.get(session_id, seen.last)
        changed = [
            path
            for path, digest in digests.items()
            if digest and before.get(path, digest) != digest
        ]
        seen.last.update(digests)
        seen.sessions.pop(session_id, None)
        seen.sessions[session_id] = dict(digests)
        while len(seen.sessions) > MAX_SESSIONS_KEPT:
            del seen.sessions[next(iter(seen.sessions))]
        try:
            ensure_private_dir(self.path.parent)
            write_atomic(self.path, orjson.dumps(seen.model_dump(mode="json", by_alias=True)))
        except OSError as error:
            logger.warning(
                "context: cannot keep the digests of the project files in %s (%s)",
                self.path,
                error.strerror or type(error).__name__,
            )
        return changed
