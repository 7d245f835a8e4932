"""Secret redaction: one detector of credentials, shared by logs, errors and sessions.

A :class:`Redactor` finds secrets in text by their *format* (the token shapes of
GitHub, GitLab, AWS, Google, Slack, Stripe, OpenAI, Anthropic, Hugging Face,
npm, PyPI, JSON web tokens, private key blocks, passwords in URLs,
``Authorization: Bearer`` headers and ``password=...`` assignments) and, once
told about them with :meth:`Redactor.add_values`, by their *value* (the values
of the variables the environment sanitizer removed). Each secret becomes
``[REDACTED:<kind>]``; the kind never carries the value.

The same detection backs three users:

- the logging filter of :mod:`._logging`, so no log line of the project prints a secret;
- ``ollm_cli.cli.output.print_error`` and the config loader, through :func:`redact`;
- the environment sanitizer's value check, through :func:`find_secrets`.

Every pattern starts at a literal *anchor* (``gh``, ``AKIA``, ``://``...):
the scan finds anchors with ``str.find`` and tries the pattern only there, so
text without any anchor costs a few substring scans and no regular expression.

Example::

    redact("push with ghp_" + "a1B2" * 9)          # 'push with [REDACTED:github]'
    r = Redactor()
    r.add_values({"DB_PASSWORD": "hunter2-hunter2"})
    r.redact("login hunter2-hunter2")               # 'login [REDACTED:env:DB_PASSWORD]'
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

logger = logging.getLogger(__name__)

#: A value shorter than this is never redacted by value ("true", "1", "dev"
#: would otherwise blank out half of every transcript).
MIN_VALUE_LENGTH = 8
_MARK = "[REDACTED"


class SecretMatch(BaseModel):
    """Where a secret sits in a text: ``text[start:end]`` is the secret, ``kind`` its format."""

    model_config = ConfigDict(frozen=True)

    kind: str
    start: int
    end: int


def _mixed(secret: str) -> bool:
    """True for random-looking tokens: upper and lower case letters and a digit."""
    return (
        any(c.isdigit() for c in secret)
        and any(c.isupper() for c in secret)
        and any(c.islower() for c in secret)
    )


def _not_numeric(secret: str) -> bool:
    return not secret.isdigit()


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    anchors: tuple[str, ...]
    lower_anchors: bool = False
    group: int = 0
    check: Callable[[str], bool] | None = None


_NO_MARK = r"(?!\[REDACTED)"
# Where a token may start: like ``\b``, but also right after an escaped newline
# or tab, so that ``repr()`` of a multi-line text ("...\\nghp_...") is covered.
_B = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"

# Every pattern matches *from* one of its anchors: the scan finds the anchors
# with ``str.find`` and tries the pattern there only, so a text is never run
# through fifteen regular expressions from end to end.
_PATTERNS: tuple[_Pattern, ...] = (
    _Pattern(
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----[\s\S]*?"
            r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----|\Z)"
        ),
        ("-----BEGIN",),
    ),
    _Pattern(
        "url-password",
        re.compile(r"(?<=[A-Za-z0-9+.-])://[^\s:/@]{0,256}:" + _NO_MARK + r"([^\s/@]{1,256})@"),
        ("://",),
        group=1,
    ),
    _Pattern(
        "github",
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
        ("gh", "github_pat_"),
    ),
    _Pattern(
        "gitlab",
        re.compile(
            _B + r"(?:glpat|gldt|glrt|glptt|glft|glsoat|glcbt|gloas|glimt|glagent)"
            r"-[A-Za-z0-9_-]{20,255}"
        ),
        ("gl",),
    ),
    _Pattern(
        "aws",
        re.compile(_B + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    _Pattern(
        "google",
        re.compile(
            _B + r"(?:AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[0-9A-Za-z_-]{20,})"
            r"(?![0-9A-Za-z_-])"
        ),
        ("AIza", "ya29.", "GOCSPX-"),
    ),
    _Pattern(
        "slack",
        re.compile(
            _B + r"(?:xox[abposre]-[0-9A-Za-z-]{10,}|xapp-\d-[0-9A-Za-z-]{10,}"
            r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{10,})"
        ),
        ("xox", "xapp-", "https://hooks.slack.com"),
    ),
    _Pattern(
        "stripe",
        re.compile(_B + r"(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,})\b"),
        ("sk_", "rk_", "whsec_"),
    ),
    _Pattern(
        "anthropic",
        re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}"),
        ("sk-",),
    ),
    _Pattern(
        "openai",
        re.compile(_B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        ("sk-",),
        check=_mixed,
    ),
    _Pattern(
        "huggingface",
        re.compile(_B + r"(?:hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,})\b"),
        ("hf_", "api_org_"),
        check=lambda s: any(c.isupper() for c in s) and any(c.islower() for c in s[3:]),
    ),
    _Pattern(
        "npm",
        re.compile(_B + r"npm_[A-Za-z0-9]{36}\b"),
        ("npm_",),
        check=_mixed,
    ),
    _Pattern(
        "pypi",
        re.compile(_B + r"pypi-AgE[A-Za-z0-9_-]{50,}"),
        ("pypi-AgE",),
    ),
    _Pattern(
        "jwt",
        re.compile(_B + r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
        ("eyJ",),
    ),
    _Pattern(
        "bearer",
        re.compile(r"(?i)" + _B + r"bearer\s+" + _NO_MARK + r"([A-Za-z0-9._~+/=-]{16,})"),
        ("bearer",),
        lower_anchors=True,
        group=1,
        check=_not_numeric,
    ),
    _Pattern(
        "secret",
        re.compile(
            r"(?i)(?:password|passwd|secret|token|api[_-]?key|access[_-]?key"
            r"|private[_-]?key|credentials?)[\w.-]{0,40}[\"']?\s{0,8}[:=]\s{0,8}[\"']?"
            + _NO_MARK
            + r"([^\s\"',;&]{6,})"
        ),
        ("passw", "secret", "token", "api", "access", "private", "credential"),
        lower_anchors=True,
        group=1,
        check=_not_numeric,
    ),
)

#: The kinds of token formats this module knows, for documentation and tests.
TOKEN_KINDS: tuple[str, ...] = tuple(p.kind for p in _PATTERNS)


def _anchor_table() -> tuple[tuple[str, bool, tuple[_Pattern, ...]], ...]:
    table: dict[tuple[str, bool], list[_Pattern]] = {}
    for pattern in _PATTERNS:
        for anchor in pattern.anchors:
            table.setdefault((anchor, pattern.lower_anchors), []).append(pattern)
    return tuple((anchor, lower, tuple(ps)) for (anchor, lower), ps in table.items())


_ANCHORS = _anchor_table()
#: Up to this length a text is first checked for any anchor with one regular
#: expression (a C loop), which is cheaper than a ``find`` per anchor.
_GATE_MAX = 2048
_GATE = re.compile("|".join(re.escape(a) for a, lower, _ in _ANCHORS if not lower))
_GATE_LOWER = re.compile("|".join(re.escape(a) for a, lower, _ in _ANCHORS if lower))


def _try(pattern: _Pattern, text: str, at: int, found: list[SecretMatch]) -> int:
    """Try ``pattern`` at ``at``; returns where the match ends (``at`` if none)."""
    match = pattern.regex.match(text, at)
    if match is None:
        return at
    start, end = match.span(pattern.group)
    if pattern.check is None or pattern.check(text[start:end]):
        found.append(SecretMatch(kind=pattern.kind, start=start, end=end))
    return match.end()


def _scan(text: str) -> list[SecretMatch]:
    """Every token-format match in ``text`` (overlaps not yet resolved)."""
    lower: str | None = None
    if len(text) <= _GATE_MAX and _GATE.search(text) is None:
        lower = text.lower()
        if _GATE_LOWER.search(lower) is None:
            return []
    found: list[SecretMatch] = []
    for anchor, case_insensitive, patterns in _ANCHORS:
        haystack = text
        if case_insensitive:
            if lower is None:
                lower = text.lower()
            if len(lower) != len(text):
                # Some characters change length when lowered: scan the slow way.
                for pattern in patterns:
                    for match in pattern.regex.finditer(text):
                        _try(pattern, text, match.start(), found)
                continue
            haystack = lower
        at = haystack.find(anchor)
        while at != -1:
            end = at + 1
            for pattern in patterns:
                end = max(end, _try(pattern, text, at, found))
            at = haystack.find(anchor, end)
    return found


#: Kinds recognised by their context rather than their own shape: when one of
#: them starts where a specific token does, the specific one names the secret.
_GENERIC_KINDS = frozenset({"secret", "bearer"})


def _without_overlaps(matches: list[SecretMatch], registered: int = 0) -> list[SecretMatch]:
    """Keep the earliest of overlapping matches, in text order.

    Among matches starting at the same place, the first ``registered`` ones
    (registered values, which know the variable's name) win, then specific
    token kinds, then generic ones; then the longest.
    """
    if len(matches) < 2:
        return matches

    def rank(item: tuple[int, SecretMatch]) -> tuple[int, int, int]:
        index, match = item
        tier = 0 if index < registered else 1 + (match.kind in _GENERIC_KINDS)
        return (match.start, tier, -match.end)

    kept: list[SecretMatch] = []
    for _, match in sorted(enumerate(matches), key=rank):
        if kept and match.start < kept[-1].end:
            continue
        kept.append(match)
    return kept


def find_secrets(text: str) -> list[SecretMatch]:
    """The credentials in ``text`` recognised by their token format, in text order.

    This is the sanitizer's value check: a non-empty result means the text holds
    something that looks like a credential. Specific values registered with
    :meth:`Redactor.add_values` are not considered here.
    """
    return _without_overlaps(_scan(text))


class Redactor:
    """Finds and masks secrets in text: token formats plus registered values.

    Thread-safe for concurrent :meth:`redact` calls; :meth:`add_values`
    replaces the value table atomically.
    """

    def __init__(self, values: Mapping[str, str] | Iterable[str] | None = None) -> None:
        self._values: tuple[tuple[str, str], ...] = ()
        self._lock = threading.Lock()
        if values is not None:
            self.add_values(values)

    def add_values(self, values: Mapping[str, str] | Iterable[str], *, kind: str = "value") -> int:
        """Also redact these exact values; returns how many were added.

        A mapping is read as variable name -> value and each value is redacted as
        ``[REDACTED:env:<name>]``; a plain iterable of values uses ``kind``.
        Values shorter than :data:`MIN_VALUE_LENGTH` characters are ignored.
        """
        if isinstance(values, Mapping):
            pairs = [(str(v), f"env:{name}") for name, v in values.items()]
        else:
            pairs = [(str(v), kind) for v in values]
        added = 0
        with self._lock:
            table = dict(self._values)
            for value, value_kind in pairs:
                value = value.strip()
                if len(value) < MIN_VALUE_LENGTH or value in table:
                    continue
                table[value] = value_kind
                added += 1
            # Longest first, so a value that contains another is masked whole.
            self._values = tuple(sorted(table.items(), key=lambda item: -len(item[0])))
        return added

    @property
    def value_count(self) -> int:
        """How many specific values are registered."""
        return len(self._values)

    def find(self, text: str) -> list[SecretMatch]:
        """Every secret in ``text`` (registered values and token formats), in order."""
        matches: list[SecretMatch] = []
        for value, kind in self._values:
            start = text.find(value)
            while start != -1:
                matches.append(SecretMatch(kind=kind, start=start, end=start + len(value)))
                start = text.find(value, start + len(value))
        registered = len(matches)
        matches.extend(_scan(text))
        return _without_overlaps(matches, registered)

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
        matches = self.find(text)
        if not matches:
            return text
        parts: list[str] = []
        cursor = 0
        for match in matches:
            parts.append(text[cursor : match.start])
            parts.append(f"{_MARK}:{match.kind}]")
            cursor = match.end
        parts.append(text[cursor:])
        return "".join(parts)

    def contains_secret(self, text: str) -> bool:
        """True when :meth:`redact` would change ``text``."""
        return bool(self.find(text))


_default = Redactor()


def default_redactor() -> Redactor:
    """The process-wide redactor used by :func:`redact` and the logging filter."""
    return _default


def redact(text: str) -> str:
    """Mask the secrets in ``text`` with the process-wide :class:`Redactor`."""
    return _default.redact(text)
