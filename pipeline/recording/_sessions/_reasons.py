"""Why a file could not be read or written, in a few words a user can act on."""

from __future__ import annotations

import errno

from pydantic import ValidationError


def os_reason(exc: OSError) -> str:
    """The OS's words and the errno's name: ``No space left on device (ENOSPC)``."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or type(exc).__name__
    return f"{text} ({name})" if name else text


def invalid_reason(exc: Exception) -> str:
    """The first problem pydantic found, with where it is: ``messages.0.role: ...``."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}" if where else str(err["msg"])
    return str(exc)
