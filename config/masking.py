"""Masking secrets in configuration values before they are shown.

A config value can hold a password (``http://bob:pw@gpu.lan:11434``, a token in a
hook's command); an error about it, a ``--json`` error, ``ollm trust`` or
``ollm config show`` must never print it. :func:`mask_secrets` masks what the
session redactor knows by shape (provider keys, URL passwords, bearer tokens...),
the ``user:password@`` of an address given without a scheme (as a parser's own
message may repeat it), and any long random-looking word (a key).

Example::

    mask_secrets("http://bob:S3cret@gpu.lan:11434")   # 'http://bob:[REDACTED:url-password]@...'
    mask_secrets("'bob:S3cret@gpu.lan:x' is not an IP address")
    # "'bob:[REDACTED:userinfo]@gpu.lan:x' is not an IP address"
"""

from __future__ import annotations

import re

_USERINFO = re.compile(
    r"(?<![^\s'\"(\[,=])([^\s:/@'\"\[\]]{1,256}):(?!\[REDACTED)([^\s/@'\"\[\]]{1,256})@"
)
"""``user:password@`` at the start of a word (no scheme before it)."""


def mask_secrets(text: str) -> str:
    """``text`` with every password, key or token it holds masked."""
    from ollm_cli.base.redaction import find_secrets, redact

    masked = _USERINFO.sub(r"\1:[REDACTED:userinfo]@", redact(text))
    for match in reversed(find_secrets(masked, shapes=True)):
        masked = f"{masked[: match.start]}[REDACTED:{match.kind}]{masked[match.end :]}"
    return masked
