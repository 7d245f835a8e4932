"""The paths git's index tracks, read from ``.git/index`` without running git.

``git ls-files -z --cached`` is a process of its own: its start costs more than
reading the index of a repository of a few thousand files. So the paths are read
here, from the file git keeps them in, when it has a form this module knows in
full, and :func:`read_index` answers ``None`` for every other (git then reads it:
:class:`~ollm_cli.pipeline.discovery._git.GitRun`):

- a header ``DIRC``, the version (2, 3 or 4) and the number of entries, each a
  32-bit big-endian number;
- per entry: 62 bytes of stat data, object id (20 bytes: SHA-1 only, see
  :func:`~ollm_cli.pipeline.discovery._git_config.sha1_repository`) and flags,
  whose low 12 bits are the name's length (``0xFFF``: as long or longer); in
  version 3 and later, 2 more bytes when flag ``0x4000`` (extended) is set; then
  the name. Versions 2 and 3 end the name with 1 to 8 NULs so that the entry's
  length is a multiple of 8. Version 4 writes, before the name, how many bytes
  to cut from the end of the previous name (git's offset varint), and ends the
  rest of the name with one NUL;
- extensions, each a 4-byte signature and a 32-bit size: one whose signature
  starts with a capital letter is optional (the cached tree, the untracked
  cache...) and skipped; any other (``link``: a split index whose entries live in
  another file; ``sdir``: a sparse index whose entries stand for whole
  directories) changes what the entries mean, so git reads that index;
- the 20-byte checksum of all that precedes it. It is not computed here: it
  takes as long as reading the names (SHA-1 of a 450 KiB index: 4 ms in Python),
  and git never lets a reader see a half-written index (it writes
  ``index.lock`` and renames it). An index that does not parse whole (an entry
  or an extension past the end, a name without its NUL) goes to git, which says
  what is wrong with it.

Every name is listed once per entry (a conflict's stages list it up to three
times, as ``ls-files`` does; :class:`TrackedFiles` is a set), gitlinks
(submodules) included, relative to the scan root: only the names under it.

Example::

    names = read_index("/work/project/.git/index", "src")
    names   # ["src/app.py", ...] relative to /work/project/src: ["app.py", ...]
"""

from __future__ import annotations

import os
import struct

from ollm_cli.pipeline.discovery._ignore_rules import read_regular

#: The largest index read here (git's index of the Linux kernel is ~10 MiB).
MAX_INDEX_BYTES = 256 * 1024 * 1024

#: The longest name read here (Linux's ``PATH_MAX``); git reads an index with longer ones.
MAX_NAME_BYTES = 4096

_HEADER = struct.Struct(">4sLL")
_EXTENSION = struct.Struct(">4sL")
_HASH = 20
_STAT_AND_ID = 60  # the stat data and the object id that precede the flags
_EXTENDED = 0x4000
_NAME_MASK = 0xFFF


class IndexFormError(ValueError):
    """An index this module does not read (or not whole): git reads it."""


def read_index(path: str, under: str = "") -> list[str] | None:
    """The names the index at ``path`` tracks under ``under`` (a directory relative
    to the work tree, ``""`` for all of it), relative to ``under``; ``None`` when
    git must read it (see the module's text). ``OSError`` when it cannot be read."""
    names = index_names(read_regular(path, MAX_INDEX_BYTES))
    if names is None or not under:
        return names
    prefix = under + "/"
    cut = len(prefix)
    return [name[cut:] for name in names if name.startswith(prefix)]


def index_names(data: bytes) -> list[str] | None:
    """The entries' names, in the index's order; ``None`` for an index git must read."""
    try:
        raw = _names(data)
    except (IndexFormError, struct.error, IndexError):
        return None
    if not raw:
        return []
    # One decoding of all the names (a NUL is never inside a UTF-8 character).
    names = os.fsdecode(b"\0".join(raw)).split("\0")
    return names if len(names) == len(raw) else None  # a NUL inside a name: git's


def _names(data: bytes) -> list[bytes]:
    if len(data) < _HEADER.size + _HASH:
        raise IndexFormError("shorter than a header and a checksum")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise IndexFormError(f"not an index of version 2, 3 or 4 ({version})")
    end = len(data) - _HASH
    if version == 4:
        names, offset = _names_v4(data, count, end)
    else:
        names, offset = _names_v2(data, count, end, version)
    _check_extensions(data, offset, end)
    return names


def _names_v2(data: bytes, count: int, end: int, version: int) -> tuple[list[bytes], int]:
    """Versions 2 and 3: names padded with NULs to a multiple of 8 bytes (the hot
    loop: one pass over the entries, no call but the slice)."""
    names: list[bytes] = []
    append = names.append
    offset = _HEADER.size
    for _ in range(count):
        flags = (data[offset + _STAT_AND_ID] << 8) | data[offset + _STAT_AND_ID + 1]
        name_at = offset + _STAT_AND_ID + 2
        if flags & _EXTENDED:
            if version < 3:
                raise IndexFormError("an extended entry in a version 2 index")
            name_at += 2
        name_end = name_at + (flags & _NAME_MASK)
        if flags & _NAME_MASK == _NAME_MASK:
            name_end = data.find(b"\0", name_at, end)
        if name_end < 0 or data[name_end]:
            raise IndexFormError("a name without its NUL")
        append(data[name_at:name_end])
        offset += (name_end - offset + 8) & ~7
    if offset > end:
        raise IndexFormError("an entry past the end of the index")
    return names, offset


def _names_v4(data: bytes, count: int, end: int) -> tuple[list[bytes], int]:
    """Version 4: each name is the previous one, cut, with a suffix added."""
    names: list[bytes] = []
    append = names.append
    find = data.find
    offset = _HEADER.size
    previous = b""
    for _ in range(count):
        flags = (data[offset + _STAT_AND_ID] << 8) | data[offset + _STAT_AND_ID + 1]
        at = offset + _STAT_AND_ID + (4 if flags & _EXTENDED else 2)
        byte = data[at]
        at += 1
        cut = byte & 0x7F
        while byte & 0x80:  # git's offset varint (varint.c)
            byte = data[at]
            at += 1
            cut = ((cut + 1) << 7) | (byte & 0x7F)
        suffix_end = find(b"\0", at, end)
        if cut > len(previous) or suffix_end < 0:
            raise IndexFormError("a name that cuts more than there is, or without its NUL")
        previous = previous[: len(previous) - cut] + data[at:suffix_end]
        length = flags & _NAME_MASK
        if len(previous) > MAX_NAME_BYTES or length not in (_NAME_MASK, len(previous)):
            # Names only ever grow by their suffix: without a bound, a crafted index
            # of a few MiB would make names of terabytes.
            raise IndexFormError("a name longer than a path, or than its flags say")
        append(previous)
        offset = suffix_end + 1
    return names, offset


def _check_extensions(data: bytes, offset: int, end: int) -> None:
    """Every extension is optional (its signature starts with ``A``-``Z``) and they
    fill the space up to the checksum exactly."""
    while offset < end:
        if offset + _EXTENSION.size > end:
            raise IndexFormError("an extension's header past the end")
        signature, size = _EXTENSION.unpack_from(data, offset)
        if not b"A" <= signature[:1] <= b"Z":
            raise IndexFormError(f"a required extension ({signature!r})")
        offset += _EXTENSION.size + size
    if offset != end:
        raise IndexFormError("an extension past the end")
