"""Session identifiers: checking what users type before it becomes a path.

A session id is a lowercase UUID (``550e8400-e29b-41d4-a716-446655440000``).
Users may type a unique prefix of one, as git accepts a prefix of a commit
hash: at least :data:`MIN_PREFIX` hex digits, with or without the dashes.
Anything else (``../../etc/passwd``, an empty string, a space) is refused with
:class:`~ollm_cli.pipeline.errors.InvalidSessionIdError` before any path is built.

Example::

    canonical_id("550E8400-E29B-41D4-A716-446655440000")  # lowercase UUID
    check_prefix("550e84")                                # "550e84"
    matches_prefix("550e8400-e29b-...", "550e8400e29b")   # True
"""

from __future__ import annotations

import re
import uuid

from ollm_cli.pipeline.errors import InvalidSessionIdError

MIN_PREFIX = 4
SESSION_FILE_SUFFIX = ".json"

_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PREFIX_RE = re.compile(r"[0-9a-f][0-9a-f-]*")
_HINT = "use the id shown by `ollm sessions list` (a UUID, or a unique prefix of it)"


def is_session_id(value: str) -> bool:
    """True when ``value`` is a canonical (lowercase, dashed) UUID."""
    return len(value) == 36 and _UUID_RE.fullmatch(value) is not None


def checked_id(value: str) -> str:
    """``value`` if it is a canonical session id, else :class:`InvalidSessionIdError`.

    For ids that name a file or folder and come from the program itself: no
    normalising, so that the path is the one the id names::

        checked_id("0b0e5d4c-2f55-4e43-9a53-0c8d6f0e4a11")   # the same string
        checked_id("../etc")                                  # InvalidSessionIdError
    """
    if is_session_id(value):
        return value
    raise InvalidSessionIdError(f"{_shown(value)} is not a session id", hint=_HINT)


def canonical_id(value: str) -> str:
    """The canonical form of a full session id, or :class:`InvalidSessionIdError`."""
    text = value.strip().lower()
    if is_session_id(text):
        return text
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        raise InvalidSessionIdError(f"{_shown(value)} is not a session id", hint=_HINT) from None
    return str(parsed)


def check_prefix(value: str) -> str:
    """Validate a user-typed id or prefix and return it lowercased.

    Only hex digits and dashes are accepted, at least :data:`MIN_PREFIX` digits,
    so the result can never name anything outside the sessions folder.
    """
    text = value.strip().lower()
    digits = text.replace("-", "")
    if not text or len(text) > 36 or _PREFIX_RE.fullmatch(text) is None:
        raise InvalidSessionIdError(f"{_shown(value)} is not a session id", hint=_HINT)
    if len(digits) < MIN_PREFIX:
        raise InvalidSessionIdError(
            f"session id prefix {_shown(value)} is too short",
            hint=f"type at least {MIN_PREFIX} characters of the id",
        )
    return text


def matches_prefix(session_id: str, prefix: str) -> bool:
    """Whether canonical ``session_id`` starts with the checked ``prefix``.

    A prefix with dashes must match the dashed form; one without may match
    either form (``550e8400e29b`` finds ``550e8400-e29b-...``).
    """
    if session_id.startswith(prefix):
        return True
    return "-" not in prefix and session_id.replace("-", "").startswith(prefix)


def session_id_of_file(name: str) -> str | None:
    """The id of a session file name (``{id}.json``), or None for any other name."""
    if len(name) != 36 + len(SESSION_FILE_SUFFIX) or not name.endswith(SESSION_FILE_SUFFIX):
        return None
    stem = name[:36]
    return stem if is_session_id(stem) else None


def new_session_id() -> str:
    """A fresh random session id."""
    return str(uuid.uuid4())


def _shown(value: str) -> str:
    """The value as shown in a message: quoted, control characters escaped, cut short."""
    shown = value if len(value) <= 60 else value[:57] + "..."
    return repr(shown)
