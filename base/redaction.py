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

import base64
import binascii
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ollm_cli.base.secret_literals import assigned_secret, bare_secret, secret_key

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


_DIGIT = re.compile(r"\d")


def _mixed(secret: str) -> bool:
    """True for random-looking tokens: upper and lower case letters and a digit."""
    # comparing with the lowered and uppered copies runs in C: a hex digest fails at once
    return (
        secret != secret.lower() and secret != secret.upper() and _DIGIT.search(secret) is not None
    )


def _not_numeric(secret: str) -> bool:
    return not secret.isdigit()


#: A placeholder filled in later: ``{password}``, ``${DB_PASS}``, ``$DB_PASS``, ``%s``,
#: ``%(password)s``, ``<pass>``, ``****``.
_TEMPLATE = re.compile(r"\{.*\}|\$\{.*|\$[A-Z_]+|%(?:\(\w+\))?s|<.*>|\*+")


def _template(secret: str) -> bool:
    return _TEMPLATE.fullmatch(secret) is not None


def _token_like(secret: str) -> bool:
    """Not a number and not a word (``Bearer authentication``): what a token looks like."""
    return not secret.isdigit() and not secret.isalpha()


def _ordinary_word(candidate: str) -> bool:
    """A plain lower-case word ("the password is required"), not a secret."""
    return candidate.isalpha() and candidate.islower()


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _encoded_text(candidate: str) -> bool:
    """True when ``candidate`` is base64 of readable text (a greeting, not a key)."""
    padded = candidate + "=" * (-len(candidate) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True)
    except (ValueError, binascii.Error):
        return False
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c.isspace() for c in text)


def _random_looking(candidate: str) -> bool:
    """Mixed case and digits, high entropy, and not base64 of readable text."""
    return (
        _mixed(candidate)
        and entropy(candidate) >= HIGH_ENTROPY_BITS
        and not _encoded_text(candidate)
    )


#: Bits per character from which a long unbroken string counts as random (a key):
#: base64 keys sit at 4.5-5.2; hex digests, UUIDs and words stay under 4.
HIGH_ENTROPY_BITS = 4.2
#: A bare AWS secret access key (40 characters of base64), found without an anchor. It
#: stands alone: not after a ``.`` (``github.com/owner/repo/...``), ``-``, ``_``, ``@``...
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=.\-_@%~#\\])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=\-_@%~#\\]|\.\w)"
)


def _path_like(candidate: str) -> bool:
    """A path of words (``com/Owner/Repo/issues/new``), not a key that happens to hold ``/``:
    it starts or ends with ``/``, or two of its parts are plain words."""
    if "/" not in candidate:
        return False
    if candidate.startswith("/") or candidate.endswith("/"):
        return True
    parts = candidate.split("/")
    words = sum(1 for p in parts if len(p) >= 3 and p.isalpha() and (p.islower() or p.istitle()))
    return words >= 2


_CAMEL_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _camel_name(candidate: str) -> bool:
    """A long CamelCase name (``V1OrganizationExternalKeysPostRequestAws``): words of
    4.5 letters or more on average, where 40 random characters stay under 4.3."""
    if not candidate.isalnum():
        return False
    words = _CAMEL_WORD.findall(candidate)
    return sum(map(len, words)) / len(words) >= 4.5


def _aws_secret(candidate: str) -> bool:
    return _random_looking(candidate) and not _path_like(candidate) and not _camel_name(candidate)


def _has_long_word(text: str, length: int = 40) -> bool:
    """Whether ``text`` holds a run of ``length`` non-space characters (``str.split`` runs
    in C; a regular expression tried at every position costs ten times more on prose)."""
    return max(map(len, text.split()), default=0) >= length


#: A long unbroken token for the value check of environment variables.
_HIGH_ENTROPY = re.compile(r"[A-Za-z0-9+/=_.~-]{24,}")


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    anchors: tuple[str, ...]
    lower_anchors: bool = False
    group: int = 0
    check: Callable[[str], bool] | None = None
    #: Where the secret of a match is, or None when there is none (replaces ``group``).
    locate: Callable[[str, re.Match[str]], tuple[int, int] | None] | None = None


_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _assigned(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The literal secret assigned to the key matched (``password = "..."``), or None
    when the key names no secret or the value is code (see :mod:`._literals`)."""
    start = match.start()
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    if start > 0 and text[start - 1] == "\\" and text[start] in "nrt":
        start += 1  # repr() of a multi-line text: "\\napi_key=..." is the key api_key
    if not secret_key(text[start : match.end(1)]):
        return None
    if text[match.end() - 1 : match.end() + 1] == "=" + "=":
        return None
    before = text[text.rfind("\n", 0, start) + 1 : start].strip()
    return assigned_secret(
        text,
        match.end(),
        line_start=before in ("", "export", "-"),
        parameter=text[start - 1 : start] in ("?", "&", ";"),
    )


def _spoken_secret(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """``my password is Hunter2-Zebra.``: the token, without the sentence's punctuation."""
    start, end = match.span(1)
    while end > start and text[end - 1] in ".!?:)":
        end -= 1
    # prose: a numbered word (hunter2) is the password, a snake_case name is code
    if text.startswith(_MARK, start) or not bare_secret(text[start:end], config="spaced"):
        return None
    return start, end


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
        check=lambda s: not _template(s),
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
    # Prefixed formats of other providers, as published by each and listed in
    # gitleaks' rule table: a fixed prefix and a fixed shape, so no context is needed.
    _Pattern(
        "age",
        re.compile(r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
        ("AGE-SECRET-KEY-1",),
    ),
    _Pattern("shopify", re.compile(_B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"), ("shp",)),
    _Pattern("sendgrid", re.compile(_B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"), ("SG.",)),
    _Pattern(
        "digitalocean",
        re.compile(_B + r"do[opr]_v1_[a-f0-9]{64}\b"),
        ("doo_v1_", "dop_v1_", "dor_v1_"),
    ),
    _Pattern("databricks", re.compile(_B + r"dapi[a-f0-9]{32}(?:-\d)?\b"), ("dapi",)),
    _Pattern("doppler", re.compile(_B + r"dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{40,44}"), ("dp.",)),
    _Pattern("linear", re.compile(_B + r"lin_api_[A-Za-z0-9]{40}\b"), ("lin_api_",)),
    _Pattern("postman", re.compile(_B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"), ("PMAK-",)),
    _Pattern(
        "grafana",
        re.compile(_B + r"(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
        ("glc_", "glsa_"),
        check=_mixed,
    ),
    _Pattern("atlassian", re.compile(_B + r"ATATT3[A-Za-z0-9_=-]{150,}"), ("ATATT3",)),
    _Pattern("square", re.compile(_B + r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}"), ("sq0",)),
    _Pattern("1password", re.compile(_B + r"ops_eyJ[A-Za-z0-9+/]{200,}={0,3}"), ("ops_eyJ",)),
    _Pattern("mailgun", re.compile(_B + r"key-[0-9a-zA-Z]{32}\b"), ("key-",), check=_mixed),
    _Pattern(
        "jwt",
        re.compile(_B + r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*"),
        ("eyJ",),
    ),
    _Pattern(
        "bearer",
        re.compile(r"(?i)" + _B + r"bearer\s+" + _NO_MARK + r"([A-Za-z0-9._~+/=-]{16,})"),
        ("bearer",),
        lower_anchors=True,
        group=1,
        check=_token_like,
    ),
    _Pattern(
        "basic-auth",
        re.compile(
            r"(?i)authorization\s{0,8}[:=]\s{0,8}[\"']?basic\s+"
            + _NO_MARK
            + r"([A-Za-z0-9+/=_-]{8,})"
        ),
        ("authorization",),
        lower_anchors=True,
        group=1,
    ),
    _Pattern(
        "connection-string",
        re.compile(
            r"(?i)(?:accountkey|sharedaccesskey|sharedsecretvalue|sharedaccesssignature)"
            r"\s{0,4}=\s{0,4}" + _NO_MARK + r"([^\s;\"']{8,})"
        ),
        ("accountkey", "sharedaccess", "sharedsecret"),
        lower_anchors=True,
        group=1,
    ),
    _Pattern(
        "spoken-secret",
        re.compile(
            r"(?i)(?:password|passwd|passphrase|pwd|secret|token|api[ _-]?key|credentials?)"
            r"(?:\s+(?:is|was|being|are|of|for|set\s+to))+\s+[\"'`]?"
            + _NO_MARK
            + r"([^\s\"'`,;]{6,})"
        ),
        ("passw", "passphrase", "pwd", "secret", "token", "api", "credential"),
        lower_anchors=True,
        locate=lambda text, match: _spoken_secret(text, match),
    ),
    _Pattern(
        "cli-password",
        re.compile(
            r"(?i)(?:(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,200}?\s-p"
            r"|sshpass\b[^\n]{0,40}?\s-p\s+)" + _NO_MARK + r"([^\s\-][^\s]{3,})"
        ),
        ("mysql", "mariadb", "sshpass"),
        lower_anchors=True,
        group=1,
        check=lambda s: not _template(s.strip("\"'")),  # -p"$MYSQL_PWD" is a variable
    ),
    _Pattern(
        "secret",
        re.compile(
            r"(?i)(?:password|passwd|secret|token|api[_-]?key|access[_-]?key"
            r"|private[_-]?key|credentials?)([\w.-]{0,40})[\"']?[ \t]{0,8}[:=]"
        ),
        ("passw", "secret", "token", "api", "access", "private", "credential"),
        lower_anchors=True,
        locate=lambda text, match: _assigned(text, match),
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
    if pattern.locate is not None:
        span = pattern.locate(text, match)
        if span is None:
            return match.end()
        start, end = span
        found.append(SecretMatch(kind=pattern.kind, start=start, end=end))
        return max(end, match.end())
    start, end = match.span(pattern.group)
    if pattern.check is None or pattern.check(text[start:end]):
        found.append(SecretMatch(kind=pattern.kind, start=start, end=end))
    return match.end()


def _scan(text: str) -> list[SecretMatch]:
    """Every token-format match in ``text`` (overlaps not yet resolved)."""
    found = _scan_anchored(text)
    if len(text) >= 40 and _has_long_word(text):
        for match in _AWS_SECRET.finditer(text):
            if _aws_secret(match.group(0)):
                found.append(SecretMatch(kind="aws-secret", start=match.start(), end=match.end()))
    return found


def _scan_anchored(text: str) -> list[SecretMatch]:
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
_GENERIC_KINDS = frozenset(
    {"secret", "bearer", "spoken-secret", "aws-secret", "high-entropy", "learned"}
)


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


def find_secrets(text: str, *, shapes: bool = False) -> list[SecretMatch]:
    """The credentials in ``text`` recognised by their token format, in text order.

    This is the sanitizer's value check: a non-empty result means the text holds
    something that looks like a credential. Specific values registered with
    :meth:`Redactor.add_values` are not considered here. ``shapes`` also counts
    any long random-looking string (:data:`HIGH_ENTROPY_BITS`): right for one
    environment value, too eager for prose.
    """
    found = _scan(text)
    if shapes and len(text) >= 24:
        for match in _HIGH_ENTROPY.finditer(text):
            candidate = match.group(0).strip("=")
            if len(candidate) >= 24 and _random_looking(candidate):
                found.append(SecretMatch(kind="high-entropy", start=match.start(), end=match.end()))
    return _without_overlaps(found)


#: At most this many secrets found in passing are remembered by one :class:`Redactor`.
MAX_LEARNED = 128
#: A secret found by its shape is remembered (and its other copies masked) from this length.
MIN_LEARNED_LENGTH = 6
_UNLEARNED_KINDS = frozenset({"private-key"})


#: What a token is made of, for "a whole copy": ``Zq7-pass`` is not whole in ``Zq7-pass-2``.
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _learnable(secret: str) -> bool:
    """Whether other copies of ``secret`` may be masked by its value: a token of one line,
    long enough, and not a word (``Field``, ``document``) that code repeats everywhere."""
    return (
        len(secret) >= MIN_LEARNED_LENGTH
        and "\n" not in secret
        and not secret.isalpha()
        and not secret.isdigit()
    )


def _copies(text: str, value: str, kind: str, into: list[SecretMatch], *, whole: bool) -> None:
    """Append every copy of ``value`` in ``text``; with ``whole``, only those that stand as
    a whole token (``Zq7-pass`` is not masked inside ``xZq7-pass2``)."""
    head = value[0] in _WORD_CHARS
    tail = value[-1] in _WORD_CHARS
    start = text.find(value)
    while start != -1:
        end = start + len(value)
        if not whole or (
            not (head and start > 0 and text[start - 1] in _WORD_CHARS)
            and not (tail and end < len(text) and text[end] in _WORD_CHARS)
        ):
            into.append(SecretMatch(kind=kind, start=start, end=end))
        start = text.find(value, end)


class Redactor:
    """Finds and masks secrets in text: token formats plus registered values.

    Thread-safe for concurrent :meth:`redact` calls; :meth:`add_values`
    replaces the value table atomically.
    """

    def __init__(
        self, values: Mapping[str, str] | Iterable[str] | None = None, *, learn: bool = True
    ) -> None:
        self._values: tuple[tuple[str, str], ...] = ()
        self._learned: dict[str, str] = {}
        self._learn = learn
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
        """Every secret in ``text``, in order: registered values, token formats, and
        every other copy of a secret found (in this text or, with ``learn``, before).

        ``postgres://u:Sup3r-Pass@db, the password being Sup3r-Pass`` masks both
        copies: the URL's password is found by its place, the second by its value.
        """
        matches: list[SecretMatch] = []
        for value, kind in self._values:
            _copies(text, value, kind, matches, whole=False)
        learned = self._learned
        for value, kind in tuple(learned.items()):
            _copies(text, value, kind, matches, whole=True)
        registered = len(matches)
        scanned = _scan(text)
        if scanned:
            fresh: dict[str, str] = {}
            for match in scanned:
                secret = text[match.start : match.end]
                if (
                    match.kind not in _UNLEARNED_KINDS
                    and secret not in learned
                    and _learnable(secret)
                ):
                    fresh[secret] = match.kind
            for secret, kind in fresh.items():
                _copies(text, secret, kind, scanned, whole=True)
            if fresh and self._learn:
                self._remember(fresh)
            matches.extend(scanned)
        return _without_overlaps(matches, registered)

    def _remember(self, fresh: Mapping[str, str]) -> None:
        """Keep secrets found in passing, so that later copies (the model's echo of a
        pasted password) are masked too; the oldest go past :data:`MAX_LEARNED`."""
        with self._lock:
            table = dict(self._learned)
            table.update(fresh)
            while len(table) > MAX_LEARNED:
                del table[next(iter(table))]
            # Longest first, so that a secret containing another is masked whole.
            self._learned = dict(sorted(table.items(), key=lambda item: -len(item[0])))

    def forget_learned(self) -> None:
        """Drop the secrets remembered in passing (registered values stay)."""
        with self._lock:
            self._learned = {}

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
        return self.redact_counted(text)[0]

    def redact_counted(self, text: str) -> tuple[str, int]:
        """:meth:`redact`, and how many secrets it masked (an importer's count of what
        it changed; counting ``[REDACTED:`` in the result would also count marks the
        text held before)."""
        matches = self.find(text)
        if not matches:
            return text, 0
        parts: list[str] = []
        cursor = 0
        for match in matches:
            parts.append(text[cursor : match.start])
            parts.append(f"{_MARK}:{match.kind}]")
            cursor = match.end
        parts.append(text[cursor:])
        return "".join(parts), len(matches)

    def contains_secret(self, text: str) -> bool:
        """True when :meth:`redact` would change ``text``."""
        return bool(self.find(text))


_default = Redactor(learn=False)


def default_redactor() -> Redactor:
    """The process-wide redactor used by :func:`redact` and the logging filter."""
    return _default


def redact(text: str) -> str:
    """Mask the secrets in ``text`` with the process-wide :class:`Redactor`."""
    return _default.redact(text)
