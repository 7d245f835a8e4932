"""The one exception hierarchy of OLLM.

Every error a user can meet is an :class:`OllmError` whose message says what
happened and what to do about it. The CLI maps each class to an exit code in
one place (``ollm_cli.cli.exit_codes``). No message ever carries a secret value: code
that builds one passes it through :func:`ollm_cli.base.redaction.redact` first.
"""

from __future__ import annotations


class OllmError(Exception):
    """Base of every error OLLM raises on purpose.

    ``hint`` is the part that tells the user what to do next; it is kept apart
    so that ``--json`` output can carry it as its own field.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UsageError(OllmError):
    """The command line asks for something that cannot be done as written."""

    exit_code = 2


class PromptTooLargeError(UsageError):
    """A message larger than the room the model's window leaves for it: refused
    before anything is recorded or sent, never cut without the user's consent.

    ``prompt_tokens``, ``room_tokens`` and ``window`` are in the model's tokens (as
    estimated); ``room_estimate`` is the room in the counter's own tokens, what a
    client cuts the message to when the user consents (``--truncate-prompt``).
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        prompt_tokens: int = 0,
        room_tokens: int = 0,
        window: int = 0,
        room_estimate: int = 0,
    ) -> None:
        super().__init__(message, hint=hint)
        self.prompt_tokens = prompt_tokens
        self.room_tokens = room_tokens
        self.window = window
        self.room_estimate = room_estimate


class ConfigError(OllmError):
    """A configuration file or variable is invalid."""

    exit_code = 3


class UnsafeHomeError(ConfigError):
    """A folder or file of OLLM's home belongs to another user, or others may write it:
    what it holds (hooks, trusted folders, sessions, the service's address) would be
    obeyed as the user's own, so it is refused, never used or "fixed" in place."""


class SessionError(OllmError):
    """A session could not be read, written or found."""

    exit_code = 4


class SessionNotFoundError(SessionError):
    """No session has the given identifier or prefix."""


class AmbiguousSessionIdError(SessionError):
    """A session-id prefix matches more than one session."""


class InvalidSessionIdError(SessionError):
    """A user-supplied identifier is not a valid session id (or prefix)."""


class SessionLockedError(SessionError):
    """Another process holds the writer lock of a session."""


class SessionCorruptError(SessionError):
    """A session file does not parse; it has been moved aside."""


class StorageError(SessionError):
    """The disk refused a write (full, read-only, permission)."""


class CheckpointError(SessionError):
    """A workspace checkpoint could not be kept, read or restored (a damaged store,
    a workspace that moved or is read-only, a disk full mid-restore)."""


class LoopDetectedError(OllmError):
    """A loop or limit stopped the turn."""

    exit_code = 5


class ProviderError(OllmError):
    """The model provider failed or could not be reached."""

    exit_code = 6


class StaleContextError(ProviderError):
    """The provider actor no longer holds the messages a chat builds on (it was
    restarted, or forgot them): the coordinator sends the whole request again."""


class ToolError(OllmError):
    """A tool could not be run (bad arguments, denied, sandbox unavailable)."""

    exit_code = 7


class SandboxUnavailableError(ToolError):
    """bubblewrap cannot run here and unsandboxed execution is not allowed."""


class ActorFailedError(OllmError):
    """A pipeline actor died while serving a turn; it is being restarted."""

    exit_code = 8


class InvalidContextError(OllmError):
    """A context entry cannot be added (empty key, unknown source, bad TTL)."""


class ServiceError(OllmError):
    """The local OLLM service could not be started, reached or stopped."""

    exit_code = 8


class ServiceLostError(ActorFailedError):
    """The local OLLM service stopped while this command was talking to it."""
