"""The content-addressed store of file contents a session's checkpoints point to.

Each content is kept once per session, whatever the number of files or edits
that held it, as ``blobs/{digest[:2]}/{digest[2:]}``: the sha256 of the
content (hex), the file holding the content compressed with zlib (level 1:
fast, and text shrinks 3-5x). A blob is written atomically (temporary file,
rename), read back only through :meth:`BlobStore.get`, which checks the digest
(a damaged store is an error that says so, never a wrong file restored).

The store counts its bytes against ``checkpoints.maxMb``: :meth:`BlobStore.put`
refuses a content that would go beyond it (:class:`BudgetExceeded`), and the
change is then recorded as not kept.

Example::

    blobs = BlobStore(folder, max_bytes=512 * 2**20)
    digest = blobs.put(b"hello")          # the same digest for the same bytes
    blobs.get(digest) == b"hello"
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import zlib
from pathlib import Path

from ollm_cli.pipeline.errors import CheckpointError

_LEVEL = 1


class BudgetExceeded(Exception):
    """Keeping a content would take the session's checkpoints beyond ``maxMb``."""


def digest_of(data: bytes) -> str:
    """The address of ``data`` in a store (sha256, hex)."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    """One session's contents, addressed by digest, deduplicated and compressed."""

    def __init__(self, folder: Path, *, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._used: int | None = None

    def path(self, digest: str) -> Path:
        """Where the blob of ``digest`` is (or would be)."""
        return self.folder / digest[:2] / digest[2:]

    @property
    def used(self) -> int:
        """Bytes the blobs take on disk (counted once, then kept up to date)."""
        if self._used is None:
            total = 0
            if self.folder.is_dir():
                for sub in os.scandir(self.folder):
                    if sub.is_dir(follow_symlinks=False):
                        for blob in os.scandir(sub.path):
                            with contextlib.suppress(OSError):
                                total += blob.stat(follow_symlinks=False).st_size
            self._used = total
        return self._used

    def has(self, digest: str) -> bool:
        """Whether the store holds ``digest``."""
        return self.path(digest).exists()

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Keep ``data``; returns its digest (nothing written when it is there already)."""
        digest = digest or digest_of(data)
        target = self.path(digest)
        if target.exists():
            return digest
        packed = zlib.compress(data, _LEVEL)
        if self.used + len(packed) > self.max_bytes:
            raise BudgetExceeded(digest)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            with open(temporary, "xb") as handle:
                handle.write(packed)
            os.chmod(temporary, 0o600)
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise
        self._used = self.used + len(packed)
        return digest

    def get(self, digest: str) -> bytes:
        """The content of ``digest``, checked (:class:`CheckpointError` if missing or damaged)."""
        path = self.path(digest)
        try:
            data = zlib.decompress(path.read_bytes())
        except FileNotFoundError:
            raise CheckpointError(
                f"the checkpoint store {self.folder} has lost the content {digest[:12]}",
                hint="the files it held cannot be restored; nothing was changed",
            ) from None
        except (OSError, zlib.error) as exc:
            raise CheckpointError(
                f"the checkpoint store {self.folder} is damaged (content {digest[:12]}: {exc})",
                hint="the files it held cannot be restored; nothing was changed",
            ) from None
        if digest_of(data) != digest:
            raise CheckpointError(
                f"the checkpoint store {self.folder} is damaged (content {digest[:12]} does "
                "not match its digest)",
                hint="the files it held cannot be restored; nothing was changed",
            )
        return data

    def link_into(self, other: BlobStore, digest: str) -> None:
        """Give ``other`` the blob of ``digest`` (a hard link when possible, else a copy)."""
        source, target = self.path(digest), other.path(digest)
        if target.exists() or not source.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.link(source, target)
        except OSError:
            other.put(self.get(digest), digest)
