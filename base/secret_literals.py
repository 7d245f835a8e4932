"""Telling a secret *value* from code: what follows ``password =`` or ``token:``.

``password = "hunter2-Zebra"`` holds a secret; ``password: SecretStr = Field(...)``,
``token = Base.url_encode64(data)``, ``csrfToken = document.querySelector(...)``
and ``api_key: anthropic_api_key()`` hold code. The assignment rule of
:mod:`._redaction` finds the key and the operator, then asks
:func:`assigned_secret` where the value is and whether it is a secret. A value
is a secret only when it is a *literal*:

- a quoted string, or a bare token (``.env``, YAML, a command line), and
- not a call, a subscript, an attribute chain (``settings.SECRET_KEY``), a
  variable reference (``$TOKEN``, ``${{ secrets.X }}``, ``{password}``,
  ``@token``, ``:password``), a type annotation, a keyword (``None``, ``true``);
- not a name or words (``"access_token"``, ``"DB_PASSWORD"``, ``"Password"``,
  ``"my-app-secret"``), prose (a quoted sentence), a number or a version, a
  path, a file name, a URL (passwords inside URLs have a rule of their own)
  or a placeholder (``"YOUR_API_KEY"``, ``"xxxxxx"``, ``"<token>"``).

The key must name a secret too, as a whole word: ``csrfToken`` and
``DB_PASSWORD`` do, ``tokenizer`` and ``tokens`` do not, and a key whose last
word names a reference (``token_url``, ``secret_name``, ``password_file``,
``api_key_id``) holds no secret.

Example::

    assigned_secret('password = "Sup3r-Secret"', 10)   # (12, 24): the text between the quotes
    assigned_secret("token = Base.url_encode64(d)", 7)  # None
"""

from __future__ import annotations

import re
from typing import Literal

#: The shortest literal worth masking (``"abc"`` or ``"dev"`` are not secrets).
MIN_LITERAL_LENGTH = 6

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
#: Words that make a key a secret's key when they stand whole in it.
_SECRET_KEY_WORDS = frozenset(
    {
        "password", "passwd", "passphrase", "pwd", "secret", "token", "apikey",
        "credential", "credentials", "accesskey", "privatekey", "secretkey", "pass",
    }
)  # fmt: skip
#: Words that make a secret's key when they precede ``key``: ``api_key``, ``privateKey``.
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "signing", "encryption"})
#: Last words of a key that holds a reference to a secret, or something about it.
_REFERENCE_WORDS = frozenset(
    {
        "name", "names", "id", "ids", "url", "urls", "uri", "endpoint", "path", "paths",
        "file", "files", "dir", "type", "types", "kind", "count", "length", "len", "size",
        "ref", "env", "var", "vars", "header", "field", "param", "prefix", "suffix",
        "policy", "provider", "format", "ttl", "timeout", "expiry", "expires", "expiration",
        "lifetime", "limit", "max", "min", "mode", "store", "manager", "class", "version",
        "label", "hint", "placeholder", "message", "msg", "error", "errors", "description",
        "title", "prompt", "help", "pattern", "regex", "hash", "location", "source",
        "command", "cmd", "helper", "handler", "service", "method", "scope", "scopes",
        "schema", "query", "strategy", "index", "enabled", "required", "key",
        "keys", "cache", "storage", "input", "column", "arn", "template", "generator",
    }
)  # fmt: skip
_INFIXES = ("password", "passwd", "secret")


def key_words(key: str) -> list[str]:
    """``key`` split into lower-case words: ``csrfToken`` -> ``['csrf', 'token']``."""
    return [m.group(0).lower() for m in _WORD.finditer(key)]


def secret_key(key: str) -> bool:
    """Whether ``key`` names a secret (see the module docstring)."""
    words = key_words(key)
    if not words:
        return False
    found = False
    for index, word in enumerate(words):
        qualified_key = word == "key" and index > 0 and words[index - 1] in _KEY_QUALIFIERS
        if qualified_key or word in _SECRET_KEY_WORDS or any(i in word for i in _INFIXES):
            found = True
    if not found:
        return False
    last = words[-1]
    if last == "key":
        return len(words) > 1 and words[-2] in _KEY_QUALIFIERS
    return last not in _REFERENCE_WORDS


# -- the value ------------------------------------------------------------------------------

#: A type annotation between ``key:`` and ``=``: ``str``, ``Optional[str]``, ``&'static str``.
_ANNOTATION = re.compile(
    r"[ \t]*[&*]?(?:'\w+[ \t]+)?[A-Za-z_][\w.]*(?:\[[^\]\n=]{0,80}\])?"
    r"(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n=]{0,80}\])?){0,4}[ \t]*=(?![=>~])[ \t]*"
)
_LINE_END = re.compile(r"[ \t]*(?:#[^\n]*)?(?:\r?\n|\Z)")
_BARE = re.compile(r"[^\s\"'`,;&(){}\[\]<>|]+")
_CHAIN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NUMBERED_NAME = re.compile(r"[A-Za-z_]+\d{1,3}")
_NAME_PART = re.compile(r"[A-Za-z]*\d{0,3}[A-Za-z]*")
_VERSION = re.compile(r"[\^~<>=v]*\d+(?:\.\d+)+(?:[-+.][\w.]+)?")
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:pem|key|crt|cer|der|p12|pfx|jks|json|txt|env|ya?ml|toml|ini|cfg|conf|gpg|asc)"
)
_PLACEHOLDER = re.compile(r"(?i)your|xxxx|\.\.\.|placeholder|replace|example|changeme|<|>|\*\*")
_KEYWORDS = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "yes", "no", "on", "off", "self", "this"}
)
#: A bare value starting with one of these is a reference or markup, not a literal:
#: ``$VAR``, ``@ivar``, ``:symbol``, YAML's ``*alias``, ``&anchor`` and ``!tag``, ``#`` comments.
_REFERENCE_STARTS = "$@:*&!#%\\="


def _wordy(value: str) -> bool:
    """Words, a name or a MIME type (``Password``, ``access_token``, ``my-app-secret``,
    ``DB_PASSWORD``, ``idToken``, ``application/json``): no digit, and words of three
    letters or more on average, not the short random runs of a key."""
    if any(c.isdigit() for c in value):
        return False
    words = _WORD.findall(value)
    if not words:
        return True
    return sum(map(len, words)) / len(words) >= 3


def literal_secret(value: str) -> bool:
    """Whether ``value``, a literal, can be a secret (the checks of the module docstring)."""
    if len(value) < MIN_LITERAL_LENGTH or any(c.isspace() for c in value):
        return False
    if value.isdigit() or _VERSION.fullmatch(value) or _wordy(value):
        return False
    if "{" in value or "}" in value or value[0] in "$%":
        return False  # a template: {password}, ${TOKEN}, %(secret)s
    if "://" in value or value.startswith(("/", "./", "../", "~/")) or value[1:3] == ":\\":
        return False
    if _FILE_NAME.fullmatch(value) or _PLACEHOLDER.search(value):
        return False
    return len(set(value)) > 2  # "aaaaaa", "------"


def bare_secret(value: str, *, config: Literal["", "spaced", "tight"] = "") -> bool:
    """Whether a bare (unquoted) token is a literal secret rather than code.

    ``config`` says the token is the whole value of a line that may be configuration:
    ``"tight"`` for ``KEY=value`` (a ``.env`` file) or ``key: value`` (YAML), where any
    name-like token (``hunter2``, ``db_pass_2``) is a value; ``"spaced"`` for
    ``key = value`` (an ini file, or Python), where ``hunter2`` is a value but
    ``next_token`` is a variable.
    """
    if value[0] in _REFERENCE_STARTS or value.lower() in _KEYWORDS:
        return False
    if _CHAIN.fullmatch(value):
        return False  # settings.SECRET_KEY, document.cookie, env::var
    if _IDENTIFIER.fullmatch(value) and config != "tight":
        if "_" in value and all(_NAME_PART.fullmatch(p) for p in value.split("_")):
            return False  # next_token, jwt_token_v2: a variable
        if not config and _NUMBERED_NAME.fullmatch(value):
            return False  # token2: a variable
    return literal_secret(value)


def _closing_quote(text: str, start: int, quote: str) -> int:
    """Index of the quote closing the string opened at ``start`` (-1 if not on this line)."""
    at = start + 1
    while at < len(text):
        char = text[at]
        if char == "\\":
            at += 2
            continue
        if char == quote:
            return at
        if char == "\n":
            return -1
        at += 1
    return -1


def assigned_secret(
    text: str, at: int, *, line_start: bool = False, parameter: bool = False
) -> tuple[int, int] | None:
    """Where the secret assigned at ``at`` sits in ``text``, or None when the value is code.

    ``at`` is right after the operator (``=`` or ``:``) that follows a secret's key;
    ``line_start``: the key begins its line (``KEY=value``, ``key: value``), so a bare
    value that ends the line is configuration (see :func:`bare_secret`);
    ``parameter``: the key is a URL query's or a connection string's
    (``?token=abc123``, ``;Password=abc123;``), whose values are never code.
    """
    operator_at = at - 1
    operator = text[operator_at]
    after = text[at : at + 1]
    if operator == "=" and (after in ("=", "~") or text[at - 2 : at - 1] in ("=", "!", "<", ">")):
        return None  # a comparison
    if operator == ":" and after == ":":
        return None  # a path: Token::new
    if after in ("=", ">"):
        at += 1  # := and =>
    annotation = _ANNOTATION.match(text, at) if operator == ":" else None
    if annotation is not None:
        at = annotation.end()
    else:
        while text[at : at + 1] in (" ", "\t"):
            at += 1
    if at >= len(text):
        return None
    quote = text[at]
    if quote in "\"'`":
        end = _closing_quote(text, at, quote)
        if end == -1:  # cut off: the token after the quote
            bare = _BARE.match(text, at + 1)
            if bare is None or not literal_secret(bare.group(0)):
                return None
            return bare.span()
        if literal_secret(text[at + 1 : end]):
            return at + 1, end
        return None
    bare = _BARE.match(text, at)
    if bare is None:
        return None
    follows = text[bare.end() : bare.end() + 1]
    if follows in ("(", "[", "{"):
        return None  # a call, a subscript, a constructor
    config: Literal["", "spaced", "tight"] = "tight" if parameter else ""
    if not parameter and line_start and _LINE_END.match(text, bare.end()) is not None:
        spaced = operator == "=" and (
            text[operator_at - 1 : operator_at].isspace() or bare.start() != operator_at + 1
        )
        config = "spaced" if spaced else "tight"
    return bare.span() if bare_secret(bare.group(0), config=config) else None
