"""Replacing a file atomically and durably: temp file, fsync, rename, fsync of the folder.

Every file is made new (:func:`create_new`: ``O_CREAT|O_EXCL|O_NOFOLLOW``) under a
name no one can guess (:func:`sibling_temp`), so a file or symbolic link planted
in the folder beforehand (``.chat.html.partial`` pointing at ``~/.bashrc``) can
neither be written through nor take the place of the new file.

Example::

    write_atomic(Path("state.json"), b"{}")
    temp = sibling_temp(Path("chat.html"), ".partial")
    with os.fdopen(create_new(temp, 0o666), "w") as handle:
        handle.write("...")
    os.replace(temp, "chat.html")
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_new(path: Path, mode: int = 0o600) -> int:
    """A descriptor open for writing on a file made now at ``path``: never an existing
    file, never through a symbolic link (:class:`FileExistsError`, or ``ELOOP``)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def sibling_temp(path: Path, suffix: str = ".tmp") -> Path:
    """A hidden name beside ``path`` that no one can guess: ``.NAME.<random>SUFFIX``."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}{suffix}")


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` so a reader sees the old or the new file, never a mix."""
    tmp = sibling_temp(path)
    fd = create_new(tmp, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
