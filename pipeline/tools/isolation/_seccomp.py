"""The seccomp filter of the sandbox: no Unix socket, no setuid or setgid bit.

A read-only bind does not stop ``connect()``: a command could reach the host's
Unix sockets (the user's D-Bus, ``docker.sock``, an SSH or GPG agent) wherever
their folders are visible. And a file a command makes setuid in the workspace
keeps its bit outside, owned by the user who ran OLLM (root, in a container).
bubblewrap loads a compiled classic-BPF program (``--seccomp FD``) just before
it runs the command; this module writes that program:

- ``socket(AF_UNIX, ...)`` fails with ``EPERM`` (``socketpair`` still works: a
  connected pair reaches nothing outside; abstract sockets are cut anyway by
  the network namespace);
- ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``, ``open``, ``openat``,
  ``creat``, ``mknod`` and ``mknodat`` with a mode holding ``S_ISUID`` or
  ``S_ISGID`` fail with ``EPERM``;
- ``openat2`` (whose mode hides behind a pointer) fails with ``ENOSYS``, so
  libc falls back to ``openat``; ``io_uring_setup`` fails with ``ENOSYS``
  (io_uring would open sockets and files past the filter);
- a system call of another ABI (x86's 32-bit one, x32) fails with ``EPERM``:
  its numbers differ and would slip through.

Only x86-64 and AArch64 are described; elsewhere :func:`filter_program` returns
``None`` and the sandbox runs without it (the rest of it still holds).

Example::

    program = filter_program()          # bytes: 8 per instruction
    len(program) // 8                   # ~50 instructions
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import NamedTuple

# classic BPF (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
# seccomp return values (linux/seccomp.h)
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]
_NR = 0
_ARCH = 4


def _arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` (little-endian)."""
    return 16 + 8 * index


_AF_UNIX = 1
_SETID_BITS = 0o6000
_X32_BIT = 0x40000000


class _Abi(NamedTuple):
    audit_arch: int
    socket: int
    mode_arg: dict[int, int]
    """System call number -> index of its mode argument."""
    refused: tuple[int, ...]
    """System calls that fail with ENOSYS."""


_ABIS: dict[str, _Abi] = {
    "x86_64": _Abi(
        audit_arch=0xC000003E,
        socket=41,
        # open, creat, chmod, fchmod, mknod, openat, mknodat, fchmodat, fchmodat2
        mode_arg={2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 257: 3, 259: 2, 268: 2, 452: 2},
        refused=(437, 425),  # openat2, io_uring_setup
    ),
    "aarch64": _Abi(
        audit_arch=0xC00000B7,
        socket=198,
        # mknodat, fchmod, fchmodat, openat, fchmodat2
        mode_arg={33: 2, 52: 1, 53: 2, 56: 3, 452: 2},
        refused=(437, 425),
    ),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _deny(code: int) -> bytes:
    return _insn(_RET_K, _ERRNO | code)


def build_program(abi: _Abi) -> bytes:
    """The filter for ``abi``: one block per rule, each starting by loading the number."""
    program = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, abi.audit_arch, jt=1),
        _deny(errno.EPERM),
        _insn(_LD_W_ABS, _NR),
        _insn(_JGE_K, _X32_BIT, jf=1),
        _deny(errno.EPERM),
    ]
    # socket(AF_UNIX, ...): number, then the domain
    program += [
        _insn(_JEQ_K, abi.socket, jf=3),
        _insn(_LD_W_ABS, _arg(0)),
        _insn(_JEQ_K, _AF_UNIX, jf=1),
        _deny(errno.EPERM),
        _insn(_LD_W_ABS, _NR),
    ]
    for number, index in sorted(abi.mode_arg.items()):
        program += [
            _insn(_JEQ_K, number, jf=3),
            _insn(_LD_W_ABS, _arg(index)),
            _insn(_JSET_K, _SETID_BITS, jf=1),
            _deny(errno.EPERM),
            _insn(_LD_W_ABS, _NR),
        ]
    for number in abi.refused:
        program += [_insn(_JEQ_K, number, jf=1), _deny(errno.ENOSYS)]
    program.append(_insn(_RET_K, _ALLOW))
    return b"".join(program)


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine (``platform.machine()``), or ``None``."""
    abi = _ABIS.get(machine or platform.machine())
    return build_program(abi) if abi is not None else None
