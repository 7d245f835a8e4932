"""EnvironmentSanitizationService: what a tool may see of the environment.

Every tool runs with ``sanitizer.sanitize(os.environ)``. A variable is
decided in this order; the first rule that applies wins:

1. **Execution hijack** — variables that change what git or the shell run
   (``GIT_SSH_COMMAND``, ``GIT_EXEC_PATH``, ``LD_PRELOAD``, ``BASH_ENV``,
   ``PROMPT_COMMAND``, ``BASH_FUNC_*``...; see :data:`EXECUTION_VARIABLES`)
   are removed, whatever the lists say.
2. **Value check** — a variable whose *value* looks like a credential (a
   private key block, a URL with a password, a token of GitHub, GitLab, AWS,
   Google, Slack, Stripe, OpenAI, Anthropic, Hugging Face, npm, PyPI, a JSON
   web token...; :func:`ollm_cli.base.redaction.find_secrets`) is removed, whatever
   its name: no name and no allow-list entry bypasses this check.
3. **Allow list** — a name on the allow list is kept.
4. **Session sockets** — variables that lead to the user's desktop session or
   agents (``DBUS_SESSION_BUS_ADDRESS``, ``XDG_RUNTIME_DIR``, ``SSH_AUTH_SOCK``,
   ``GPG_AGENT_INFO``, ``DOCKER_HOST=unix://...``, any ``*_SOCK``/``*_SOCKET``, a
   ``unix:`` value or a path in ``/run/user/``; see :data:`SESSION_VARIABLES`)
   are removed: through them a tool reaches ``systemd-run --user``, docker.sock
   or an agent that signs as the user. Put one on the allow list to pass it.
5. In ``allowOnly`` mode every other name is removed.
6. **Trust stores** — paths to the CA bundles tools need for HTTPS behind a
   corporate proxy (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``NODE_EXTRA_CA_CERTS``,
   ``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``, ``AWS_CA_BUNDLE``...; see
   :data:`TRUST_STORE_VARIABLES`) are kept when their value is a path: a
   certificate authority is public. Only a deny pattern you configured yourself
   removes one.
7. A name matching a **deny pattern** or naming a credential is removed and
   every other name is kept.

Patterns (allow list and deny patterns) are fnmatch-style and case-insensitive,
and they match **whole name segments**, ``_`` being the separator:

- the pattern and the name are both split on ``_``;
- a pattern segment that is exactly ``*`` matches one or more whole segments
  of the name;
- any other pattern segment matches exactly one segment of the name, with
  ``*``, ``?`` and ``[...]`` working inside that segment only.

So ``*_KEY`` matches ``OPENAI_API_KEY`` and ``SSH_KEY`` but not ``KEYBOARD``,
``MONKEYS``, ``API_KEYS`` or ``KEY_FILE``; ``AWS_*`` matches ``AWS_REGION``
but not ``AWSOME``; ``LC_*`` matches ``LC_ALL``; ``*_TOKEN`` leaves
``TOKENIZERS_PARALLELISM`` alone and ``SSH_AUTH_SOCK`` matches no default.

An invalid pattern (bad syntax, characters that cannot be in a name) is a
warning and the default list stands (Requirement 10.5). A configuration that
is not usable at all falls back to ``allowOnly`` with the core variables.

Example::

    sanitizer = EnvironmentSanitizationService()
    sanitizer.sanitize({"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-..."})
    # {'PATH': '/usr/bin'}
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ollm_cli.base.redaction import MIN_VALUE_LENGTH, Redactor, find_secrets
from ollm_cli.config.settings import DEFAULT_ALLOW_LIST, DEFAULT_DENY_PATTERNS, EnvironmentSettings

logger = logging.getLogger(__name__)

#: Variables that change what git, the dynamic linker or the shell execute.
EXECUTION_VARIABLES: tuple[str, ...] = (
    "LD_*",
    "DYLD_*",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "BASH_FUNC_*",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_TEMPLATE_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_*",
    "GIT_CONFIG_VALUE_*",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
    "PYTHONSTARTUP",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
)

#: Variables that lead to the user's session bus, runtime folder or agents (issue 27).
SESSION_VARIABLES: tuple[str, ...] = (
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "GNOME_KEYRING_PID",
    "KRB5CCNAME",
    "SWAYSOCK",
    "I3SOCK",
    "*_SOCK",
    "*_SOCKET",
)
#: Variables naming a container engine's endpoint: removed when it is a local socket.
ENGINE_VARIABLES: frozenset[str] = frozenset({"DOCKER_HOST", "CONTAINER_HOST", "PODMAN_HOST"})
#: A value that is a socket address or a path in the user's runtime folder.
_SOCKET_VALUE = re.compile(r"^\s*(?:(?:unix|npipe):|/run/user/|/var/run/user/)", re.IGNORECASE)
#: Paths to the certificate authorities tools trust for HTTPS (issue 23).
TRUST_STORE_VARIABLES: frozenset[str] = frozenset(
    {
        "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "PIP_CERT",
        "HTTPLIB2_CA_CERTS", "NIX_SSL_CERT_FILE", "CARGO_HTTP_CAINFO", "NPM_CONFIG_CAFILE",
        "YARN_CAFILE", "DENO_CERT", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "BUNDLE_SSL_CA_CERT",
        "CONDA_SSL_VERIFY", "UV_CA_BUNDLE", "HEX_CACERTS_PATH", "JAVAX_NET_SSL_TRUSTSTORE",
    }
)  # fmt: skip
#: Name words that make a CA path (``MY_TOOL_CA_BUNDLE``, ``ACME_CAFILE``) and those that never do.
_TRUST_WORDS = frozenset({"cafile", "capath", "cainfo", "cabundle", "cacert", "cacerts"})
_TRUST_PAIRS = frozenset({"bundle", "file", "path", "dir", "certs", "cert", "info"})
_NOT_TRUST_WORDS = frozenset({"key", "keys", "client", "password", "pass", "secret", "token"})
_PATH_VALUE = re.compile(r"^(?:[~/.]|[A-Za-z]:[\\/])[^\n]*$")


def trust_store_name(name: str) -> bool:
    """Whether ``name`` holds the path of a CA bundle: ``SSL_CERT_FILE``, ``FOO_CA_BUNDLE``."""
    if name.upper() in TRUST_STORE_VARIABLES:
        return True
    words = name_segments(name)
    if any(word in _NOT_TRUST_WORDS for word in words):
        return False
    if any(word in _TRUST_WORDS for word in words):
        return True
    return any(a == "ca" and b in _TRUST_PAIRS for a, b in itertools.pairwise(words))


#: Words that make a variable a credential wherever they stand in its name, as a
#: whole segment (``_``, ``-``, ``.`` and camelCase split it): ``MYSQL_PWD``,
#: ``API_KEYS``, ``NPM_CONFIG__AUTH``, ``SENTRY_DSN``, ``AppSecret``, ``some_auth_var``.
SECRET_WORDS: frozenset[str] = frozenset(
    {
        "password", "passwords", "passwd", "pwd", "pass", "passphrase", "passcode",
        "token", "tokens", "secret", "secrets", "key", "keys", "apikey", "apikeys",
        "auth", "authtoken", "oauth", "credential", "credentials", "creds", "cred",
        "dsn", "jwt", "cookie", "cookies", "bearer", "privatekey", "secretkey",
        "accesskey", "sessionkey", "signingkey", "pat", "otp", "totp", "private",
        "cert", "certs",
    }
)  # fmt: skip
#: Words that make a credential inside a longer segment too (``PGPASSWORD``, ``APPSECRET``).
SECRET_INFIXES: tuple[str, ...] = ("password", "passwd", "secret", "apikey", "authtoken")
#: Names of common tools' credentials the words above would not catch.
KNOWN_SECRET_NAMES: frozenset[str] = frozenset(
    {
        "DOCKER_AUTH_CONFIG", "NETRC", "PGPASSFILE", "MYSQL_PWD", "REDISCLI_AUTH",
        "VAULT_TOKEN", "CONSUL_HTTP_TOKEN", "NOMAD_TOKEN", "HEROKU_API_KEY",
        "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN", "CODECOV_TOKEN",
        "SLACK_WEBHOOK_URL", "DISCORD_WEBHOOK_URL", "TF_TOKEN_APP_TERRAFORM_IO",
    }
)  # fmt: skip
#: Whole names that look like credentials and are not (``PWD`` is the current folder).
HARMLESS_NAMES: frozenset[str] = frozenset({"PWD", "OLDPWD", "GPG_TTY", "PASS_MAX_DAYS"})
#: A name holding one of these beside ``token(s)``/``key(s)`` counts something:
#: ``MAX_TOKENS``, ``NUM_KEYS``, ``TOKEN_LIMIT``.
_QUANTITY_WORDS = frozenset(
    {"max", "min", "num", "count", "limit", "limits", "budget", "size", "len", "length"}
)
_COUNTED_WORDS = frozenset({"token", "tokens", "key", "keys"})
_SEGMENT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def name_segments(name: str) -> list[str]:
    """``name`` split into lower-case words: ``someAuthVar`` -> ``['some', 'auth', 'var']``."""
    return [m.group(0).lower() for m in _SEGMENT.finditer(name)]


def secret_name_word(name: str) -> str | None:
    """The word that makes ``name`` a credential's name, or ``None`` for an ordinary name.

    ``PGPASSWORD`` -> ``password``; ``API_KEYS`` -> ``keys``; ``KEYBOARD_LAYOUT``,
    ``TOKENIZERS_PARALLELISM`` and ``MAX_TOKENS`` -> ``None``.
    """
    upper = name.upper()
    if upper in HARMLESS_NAMES:
        return None
    if upper in KNOWN_SECRET_NAMES:
        return upper
    segments = name_segments(name)
    quantity = any(segment in _QUANTITY_WORDS for segment in segments)
    for segment in segments:
        if segment in SECRET_WORDS:
            if quantity and segment in _COUNTED_WORDS:
                continue
            return segment
        for infix in SECRET_INFIXES:
            if infix in segment:
                return infix
    if "connection" in segments and "string" in segments:
        return "connection string"
    return None


_PATTERN_CHARS = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")
_PATH_LIKE = re.compile(r"^[~/.]")


class EnvDecision(BaseModel):
    """What the sanitizer does with one variable, and why (never its value)."""

    name: str
    kept: bool
    reason: str


def _segment_regex(segment: str) -> str:
    """Translate one pattern segment; wildcards never cross a ``_``."""
    if segment == "*":
        return r"[^_]*(?:_[^_]*)*"
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append(r"[^_]*")
        elif char == "?":
            out.append(r"[^_]")
        elif char == "[":
            end = segment.find("]", i + 2)
            if end == -1:
                raise ValueError("unclosed [")
            body = segment[i + 1 : end]
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            if not body:
                raise ValueError("empty [] class")
            escaped = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif char == "]":
            raise ValueError("] without [")
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_name_pattern(pattern: str) -> re.Pattern[str]:
    """The regex of a segment-wise name pattern (see the module docstring).

    Raises ``ValueError`` for a pattern that is empty, holds characters a
    variable name cannot hold, or has an unbalanced ``[...]``.
    """
    if not pattern or not _PATTERN_CHARS.match(pattern):
        raise ValueError(f"invalid pattern {pattern!r}")
    try:
        body = "_".join(_segment_regex(segment) for segment in pattern.upper().split("_"))
        return re.compile(f"(?:{body})\\Z")
    except (ValueError, re.error) as exc:
        raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None


class _PatternSet:
    """Patterns compiled once; ``match`` answers with the first that matches."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = tuple((p, compile_name_pattern(p)) for p in self.patterns)
        joined = "|".join(f"(?:{c.pattern})" for _, c in self._compiled)
        self._any = re.compile(joined) if joined else None

    def matches(self, name: str) -> bool:
        return self._any is not None and self._any.match(name.upper()) is not None

    def first(self, name: str) -> str | None:
        upper = name.upper()
        if self._any is None or self._any.match(upper) is None:
            return None
        for pattern, regex in self._compiled:  # pragma: no branch - one of them matched
            if regex.match(upper):
                return pattern
        return None  # pragma: no cover


def _checked(patterns: Any, defaults: tuple[str, ...], what: str) -> _PatternSet:
    """Requirement 10.5: an invalid pattern is a warning, and the defaults stand."""
    if isinstance(patterns, str) or not isinstance(patterns, Iterable):
        logger.warning("environment: %s is not a list of patterns; using the defaults", what)
        return _PatternSet(defaults)
    items = list(patterns)
    bad = []
    for pattern in items:
        try:
            if not isinstance(pattern, str):
                raise ValueError(pattern)
            compile_name_pattern(pattern)
        except ValueError:
            bad.append(repr(pattern))
    if bad:
        logger.warning(
            "environment: invalid %s pattern(s) %s; using the default list instead",
            what,
            ", ".join(bad),
        )
        return _PatternSet(defaults)
    return _PatternSet(items)


_EXECUTION = _PatternSet(EXECUTION_VARIABLES)
_SESSION = _PatternSet(SESSION_VARIABLES)
_DEFAULT_DENY = frozenset(DEFAULT_DENY_PATTERNS)


def session_socket(name: str, value: str) -> bool:
    """Whether ``name=value`` leads to the user's session bus, runtime folder or an agent."""
    if _SESSION.matches(name) or _SOCKET_VALUE.match(value):
        return True
    return name.upper() in ENGINE_VARIABLES and value.strip().lower().startswith(
        ("unix://", "npipe://", "/")
    )


class EnvironmentSanitizationService:
    """Removes credentials and execution hijacks from an environment before a tool runs.

    One instance serves any number of calls; :meth:`configure` swaps the rules.
    """

    def __init__(self, settings: EnvironmentSettings | Mapping[str, Any] | None = None) -> None:
        self.mode = "default"
        self._allow = _PatternSet(DEFAULT_ALLOW_LIST)
        self._deny = _PatternSet(DEFAULT_DENY_PATTERNS)
        self.configure(settings if settings is not None else EnvironmentSettings())

    @property
    def allow_list(self) -> tuple[str, ...]:
        """The allow-list patterns in effect."""
        return self._allow.patterns

    @property
    def deny_patterns(self) -> tuple[str, ...]:
        """The deny patterns in effect."""
        return self._deny.patterns

    def configure(self, settings: EnvironmentSettings | Mapping[str, Any]) -> None:
        """Apply ``services.environment`` settings (a model or its camelCase mapping).

        Invalid patterns fall back to the default list with a warning; a
        configuration that cannot be read at all falls back to allowing only
        the core variables.
        """
        if isinstance(settings, Mapping):
            try:
                settings = EnvironmentSettings.model_validate(dict(settings))
            except ValidationError as exc:
                self._secure_fallback(f"{exc.error_count()} invalid value(s)")
                return
        if not isinstance(settings, EnvironmentSettings):
            self._secure_fallback(f"expected EnvironmentSettings, got {type(settings).__name__}")
            return
        mode = getattr(settings, "mode", None)
        if mode not in ("default", "allowOnly"):
            self._secure_fallback(f"unknown mode {mode!r}")
            return
        self.mode = mode
        self._allow = _checked(
            getattr(settings, "allow_list", None), DEFAULT_ALLOW_LIST, "allowList"
        )
        self._deny = _checked(
            getattr(settings, "deny_patterns", None), DEFAULT_DENY_PATTERNS, "denyPatterns"
        )

    def _secure_fallback(self, problem: str) -> None:
        logger.warning(
            "environment: unusable configuration (%s); passing only the core variables %s",
            problem,
            ", ".join(DEFAULT_ALLOW_LIST),
        )
        self.mode = "allowOnly"
        self._allow = _PatternSet(DEFAULT_ALLOW_LIST)
        self._deny = _PatternSet(DEFAULT_DENY_PATTERNS)

    def is_allowed(self, name: str) -> bool:
        """True when ``name`` is on the allow list (its value is still checked)."""
        return self._allow.matches(name)

    def is_denied(self, name: str) -> bool:
        """True when ``name`` alone gets it removed: a deny pattern or an execution variable."""
        return self._deny.matches(name) or _EXECUTION.matches(name)

    def _decide(self, name: str, value: str) -> tuple[bool, str]:
        if _EXECUTION.matches(name):
            return False, "changes what git or the shell executes"
        allowed = self._allow.first(name)
        trust = False
        if allowed is None:
            if session_socket(name, value):
                return False, (
                    "leads to your desktop session, runtime folder or an agent socket "
                    "(put it on services.environment.allowList to pass it)"
                )
            if self.mode == "allowOnly":
                return False, "not on the allow list (allowOnly mode)"
            pattern = self._deny.first(name)
            word = secret_name_word(name) if pattern is None else None
            if pattern is not None or word is not None:
                # a CA bundle's path is kept, unless a deny pattern of the user names it
                trust = (
                    (pattern is None or pattern in _DEFAULT_DENY)
                    and _PATH_VALUE.match(value.strip()) is not None
                    and trust_store_name(name)
                )
                if not trust and pattern is not None:
                    return False, f"name matches deny pattern {pattern}"
                if not trust:
                    return False, f"name names a credential ({word})"
        secrets = find_secrets(value, shapes=True) if value else []
        if secrets:
            kinds = sorted({s.kind for s in secrets})
            return False, f"value looks like a credential ({', '.join(kinds)})"
        if allowed is not None:
            return True, f"on the allow list ({allowed})"
        if trust:
            return True, "the path of a CA bundle tools need for HTTPS"
        return True, "matches no deny pattern"

    def sanitize(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables of ``env`` a tool may see (a new dict; ``env`` is untouched)."""
        kept: dict[str, str] = {}
        removed: list[str] = []
        for name, value in env.items():
            if self._decide(name, value)[0]:
                kept[name] = value
            else:
                removed.append(name)
        if removed and logger.isEnabledFor(logging.DEBUG):
            logger.debug("environment: removed %s", ", ".join(sorted(removed)))
        return kept

    def explain(self, env: Mapping[str, str]) -> list[EnvDecision]:
        """The decision for each variable of ``env``, sorted by name; values are never shown."""
        decisions = []
        for name in sorted(env):
            kept, reason = self._decide(name, env[name])
            decisions.append(EnvDecision(name=name, kept=kept, reason=reason))
        return decisions

    def removed_secrets(self, env: Mapping[str, str]) -> dict[str, str]:
        """Name -> value of the removed variables whose value is worth redacting.

        Execution variables (paths and commands, not secrets), values shorter
        than :data:`~ollm_cli.base.redaction.MIN_VALUE_LENGTH` and paths are left
        out, so that redaction does not blank out ordinary words of a transcript.
        """
        out: dict[str, str] = {}
        for name, value in env.items():
            stripped = value.strip()
            if len(stripped) < MIN_VALUE_LENGTH or _EXECUTION.matches(name):
                continue
            if self._decide(name, value)[0]:
                continue
            if _PATH_LIKE.match(stripped) and not find_secrets(stripped, shapes=True):
                continue
            out[name] = value
        return out

    def removed_secret_values(self, env: Mapping[str, str]) -> list[str]:
        """The values of :meth:`removed_secrets`, for the redactor of recorded text."""
        return list(self.removed_secrets(env).values())

    def redactor_for(self, env: Mapping[str, str]) -> Redactor:
        """A :class:`Redactor` that also masks the removed values, as ``[REDACTED:env:NAME]``."""
        return Redactor(self.removed_secrets(env))
