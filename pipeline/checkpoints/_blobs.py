"""The content-addressed store of file contents a session's checkpoints point to.

Each content is kept once per session, whatever the number of files or edits
that held it, as ``blobs/{digest[:2]}/{digest[2:]}`` where the digest is the
sha256 of the content (hex). A blob file is one tag byte and a zlib stream
(level 1: fast, and text shrinks 3-5x):

- ``Z``: the content itself;
- ``R``: a recipe, for contents of :data:`CHUNKED_FROM` bytes or more that cut
  into two chunks or more: the digests of its chunks, one per line, each chunk a
  ``Z`` blob of its own (never a recipe). Chunks end at line ends chosen by the
  line's content (a line whose crc32 is 0 modulo :data:`CHUNK_LINES`), or at
  :data:`CHUNK_MAX` bytes, within a line if it is longer; so an edit changes one
  or two chunks and every other chunk of the new version is already there: 100
  edits of a 100 KB file cost a fraction of 100 compressed copies (``python -m
  bench.checkpoints`` prints what they take on disk).

A blob is written atomically (temporary file, rename), read back only through
:meth:`BlobStore.get`, which checks the digest (a damaged store is an error
that says so, never a wrong file restored).

Each blob is charged to the session's :class:`StoreBudget` by what it takes on
disk (whole blocks, and the folders it makes): :meth:`BlobStore.put` refuses a
content that would take the store beyond its share of ``checkpoints.maxMb``
(:class:`BudgetExceeded`), and the change is then recorded as not kept. A content
the store holds already costs nothing, and is always taken.

Example::

    blobs = BlobStore(folder, StoreBudget(folder.parent, max_bytes=512 * 2**20))
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

from ollm_cli.pipeline.checkpoints._budget import CONTENTS, StoreBudget
from ollm_cli.pipeline.errors import CheckpointError

_LEVEL = 1
CHUNKED_FROM = 32 * 1024
"""Contents this large or larger are kept as chunks (see the module's docstring)."""
CHUNK_LINES = 32
CHUNK_MIN = 1024
CHUNK_MAX = 64 * 1024
_PLAIN = b"Z"
_RECIPE = b"R"


class BudgetExceeded(Exception):
    """Keeping a content would take the session's checkpoints beyond ``maxMb``."""


def digest_of(data: bytes) -> str:
    """The address of ``data`` in a store (sha256, hex)."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    """One session's contents, addressed by digest, deduplicated and compressed."""

    def __init__(self, folder: Path, budget: StoreBudget) -> None:
        self.folder = folder
        self.budget = budget

    def path(self, digest: str) -> Path:
        """Where the blob of ``digest`` is (or would be)."""
        return self.folder / digest[:2] / digest[2:]

    @property
    def full(self) -> bool:
        """Whether no new content fits any more (one that is there already still does)."""
        return not self.budget.allows(self.budget.block, CONTENTS)

    def has(self, digest: str) -> bool:
        """Whether the store holds ``digest``."""
        return self.path(digest).exists()

    def put(self, data: bytes, digest: str | None = None) -> str:
        """Keep ``data``; returns its digest (nothing written when it is there already)."""
        digest = digest or digest_of(data)
        if self.path(digest).exists():
            return digest
        pieces = split_chunks(data) if len(data) >= CHUNKED_FROM else [data]
        if len(pieces) == 1:  # one chunk would be the content itself: kept whole
            self._write(digest, _PLAIN, data)
            return digest
        chunks = []
        for chunk in pieces:
            chunk_digest = digest_of(chunk)
            if not self.path(chunk_digest).exists():
                self._write(chunk_digest, _PLAIN, chunk)
            chunks.append(chunk_digest)
        self._write(digest, _RECIPE, "\n".join(chunks).encode())
        return digest

    def _write(self, digest: str, tag: bytes, payload: bytes) -> None:
        if self.full:  # not even compressed: nothing can be kept
            raise BudgetExceeded(digest)
        packed = tag + zlib.compress(payload, _LEVEL)
        target = self.path(digest)
        fanout = target.parent
        made = not fanout.is_dir()
        cost = self.budget.blocks(len(packed)) + (self.budget.block if made else 0)
        if not self.budget.allows(cost, CONTENTS):
            raise BudgetExceeded(digest)
        if made:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fanout.mkdir(exist_ok=True, mode=0o700)
            self.budget.track(self.folder)
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
        self.budget.charge_new(target)
        self.budget.track(fanout)

    def _damaged(self, digest: str, why: str) -> CheckpointError:
        return CheckpointError(
            f"the checkpoint store {self.folder} is damaged (content {digest[:12]}: {why})",
            hint="the files it held cannot be restored; nothing was changed",
        )

    def _read(self, digest: str) -> tuple[bytes, bytes]:
        """``(tag, payload)`` of a blob file."""
        try:
            raw = self.path(digest).read_bytes()
        except FileNotFoundError:
            raise CheckpointError(
                f"the checkpoint store {self.folder} has lost the content {digest[:12]}",
                hint="the files it held cannot be restored; nothing was changed",
            ) from None
        except OSError as exc:
            raise self._damaged(digest, str(exc.strerror)) from None
        tag = raw[:1]
        if tag not in (_PLAIN, _RECIPE):
            raise self._damaged(digest, "unknown format")
        try:
            return tag, zlib.decompress(raw[1:])
        except zlib.error as exc:
            raise self._damaged(digest, str(exc)) from None

    def _chunks(self, payload: bytes) -> list[str]:
        return payload.decode("ascii", "replace").split("\n")

    def get(self, digest: str) -> bytes:
        """The content of ``digest``, checked (:class:`CheckpointError` if missing or damaged)."""
        tag, data = self._read(digest)
        if tag == _RECIPE:
            parts = []
            for chunk in self._chunks(data):
                chunk_tag, part = self._read(chunk)
                if chunk_tag != _PLAIN:  # a recipe's chunks are contents, never recipes
                    raise self._damaged(digest, f"its chunk {chunk[:12]} is not a content")
                parts.append(part)
            data = b"".join(parts)
        if digest_of(data) != digest:
            raise self._damaged(digest, "it does not match its digest")
        return data

    def link_into(self, other: BlobStore, digest: str) -> None:
        """Give ``other`` the blob of ``digest`` and its chunks (hard links when possible,
        else copies)."""
        source, target = self.path(digest), other.path(digest)
        if target.exists() or not source.exists():
            return
        tag, payload = self._read(digest)
        if tag == _RECIPE:
            for chunk in self._chunks(payload):
                self.link_into(other, chunk)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.link(source, target)
        except OSError:
            other._write(digest, tag, payload)
            return
        other.budget.track(other.folder)
        other.budget.charge_new(target)
        other.budget.track(target.parent)


def split_chunks(data: bytes) -> list[bytes]:
    """``data`` cut at line ends chosen by content (see the module's docstring)."""
    chunks: list[bytes] = []
    start = position = 0
    size = len(data)
    while position < size:
        end = data.find(b"\n", position)
        end = min(size if end < 0 else end + 1, start + CHUNK_MAX)  # a long line is cut
        if end - start >= CHUNK_MAX or (
            end - start >= CHUNK_MIN and zlib.crc32(data[position:end]) % CHUNK_LINES == 0
        ):
            chunks.append(data[start:end])
            start = end
        position = end
    if start < size:
        chunks.append(data[start:])
    return chunks
