"""Secrets by name and by value shape: the issue's attacks, look-alikes kept, every copy masked.

The table mixes the names the old deny patterns missed (PGPASSWORD, MYSQL_PWD,
API_KEYS, NPM_CONFIG__AUTH, SENTRY_DSN...), camelCase and lower-case names,
value shapes under innocent names, and harmless look-alikes that must reach
the tools. Several decisions follow Gemini CLI's sanitization tests.
"""

from __future__ import annotations

import pytest

from ollm_cli.base.redaction import Redactor, find_secrets, redact
from ollm_cli.pipeline.environment import EnvironmentSanitizationService, secret_name_word

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SHORT_JWT = "eyJhbGciOiJub25lIn0.eyJhIjoxfQ."
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P"
AZURE = (
    "DefaultEndpointsProtocol=https;AccountName=acme;"
    "AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==;EndpointSuffix=core.windows.net"
)
RANDOM_40 = "Qm9Zx7LpR2tV8nC1kD6hF3jG5wS0yE2uA4bN7mK9"

# (name, value, kept)
TABLE: list[tuple[str, str, bool]] = [
    # names the old deny patterns let through
    ("PGPASSWORD", "hunter2hunter2", False),
    ("MYSQL_PWD", "hunter2hunter2", False),
    ("PASSWORD", "correct horse", False),
    ("TOKEN", "abc", False),
    ("DB_PASS", "s3cret", False),
    ("API_KEYS", "k1,k2", False),
    ("NPM_CONFIG__AUTH", "dXNlcjpwYXNz", False),
    ("DOCKER_AUTH_CONFIG", '{"auths":{}}', False),
    ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1", False),
    ("AppSecret", "x", False),
    ("ORA_PASSWD", "tiger", False),
    ("some_auth_var", "x", False),
    ("apiKey", "x", False),
    ("githubPAT", "x", False),
    ("client_secret", "x", False),
    ("SECRETS_JSON", "{}", False),
    ("MY_CREDENTIALS", "x", False),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/a/key.json", False),
    ("SESSION_COOKIE", "abc", False),
    ("JWT", "x", False),
    ("REDISCLI_AUTH", "x", False),
    ("VAULT_TOKEN", "s.abcdef", False),
    ("AZURE_STORAGE_CONNECTION_STRING", "x", False),
    ("DJANGO_SECRET_KEY", "x", False),
    ("APIKEY", "x", False),
    ("X-Api-Key", "x", False),
    ("db.password", "x", False),
    ("OAUTH_CLIENT", "x", False),
    ("TOTP_SEED", "x", False),
    ("PRIVATE_KEY_PATH", "/k", False),
    ("SSH_KEYS", "x", False),
    ("passphrase", "x", False),
    ("PRIVATE_STUFF", "x", False),
    ("SSL_CERT", "/etc/ssl/me.pem", False),
    # values by shape, whatever the name
    ("BACKUP_BLOB", AWS_SECRET, False),
    ("RANDOM_THING", RANDOM_40, False),
    ("CONN", AZURE, False),
    ("HEADER", "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", False),
    ("UPSTREAM", "https://user:pa55word@git.example.com/repo.git", False),
    ("CI_ID", SHORT_JWT, False),
    ("LOGIN", JWT, False),
    ("MIRROR", "redis://:hunter2hunter2@cache:6379/0", False),
    ("NOTE", "mysql -u root -pSup3rS3cret db", False),
    (
        "SAS",
        "https://acme.blob.core.windows.net/c?sv=2020&SharedAccessSignature=sig1234567890abc",
        False,
    ),
    # harmless look-alikes and ordinary variables stay
    ("KEYBOARD_LAYOUT", "us", True),
    ("TOKENIZERS_PARALLELISM", "false", True),
    ("MAX_TOKENS", "4096", True),
    ("NUM_KEYS", "12", True),
    ("TOKEN_LIMIT", "1000", True),
    ("PWD", "/home/alice/proj", True),
    ("OLDPWD", "/home/alice", True),
    ("MONKEYS", "3", True),
    ("KEYMAP", "fr", True),
    ("AUTHOR", "Alice", True),
    ("GIT_AUTHOR_NAME", "Alice", True),
    ("BYPASS_CACHE", "1", True),
    ("COMPASS_DIR", "/opt/compass", True),
    ("PASSENGER_APP_ENV", "production", True),
    ("HOSTNAME", "box", True),
    ("GIT_COMMIT", "3f786850e387550fdab836ed7e6dc881de23001b", True),
    (
        "IMAGE_DIGEST",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        True,
    ),
    ("BUILD_UUID", "123e4567-e89b-12d3-a456-426614174000", True),
    ("GREETING_B64", "SGVsbG8gV29ybGQhIFRoaXMgaXMgYSB0ZXN0Lg==", True),
    ("NODE_ENV", "production", True),
    ("HTTP_PROXY", "http://proxy.internal:3128", True),
    ("RUST_LOG", "info,hyper=warn", True),
    ("GOPATH", "/home/alice/go", True),
    ("HISTSIZE", "1000", True),
    ("TZ", "Europe/Paris", True),
    ("LONG_WORDS", "the-quick-brown-fox-jumps-over-the-lazy-dog", True),
    ("KEYNOTE_SPEAKER", "Dr. Jane Goodall", True),
    ("CERTIFIED_DIVER", "true", True),
    ("SAFE_URL", "https://example.com/foo/bar", True),
]


@pytest.mark.parametrize(
    ("name", "value", "kept"),
    TABLE,
    ids=[f"{i}-{n}-{'kept' if k else 'removed'}" for i, (n, _, k) in enumerate(TABLE)],
)
def test_secret_table(name: str, value: str, kept: bool) -> None:
    sanitizer = EnvironmentSanitizationService()
    assert (name in sanitizer.sanitize({name: value})) is kept
    (decision,) = sanitizer.explain({name: value})
    if len(value) > 3:
        assert value not in decision.reason


def test_the_table_has_sixty_cases_with_look_alikes() -> None:
    assert len(TABLE) >= 60
    assert sum(1 for *_, kept in TABLE if kept) >= 20


@pytest.mark.parametrize(
    ("name", "word"),
    [
        ("PGPASSWORD", "password"),
        ("someAuthVar", "auth"),
        ("APIKey", "key"),
        ("KEYBOARD_LAYOUT", None),
        ("MAX_TOKENS", None),
        ("PWD", None),
    ],
)
def test_secret_name_words(name: str, word: str | None) -> None:
    assert secret_name_word(name) == word


# -- recorded text: every copy of a secret, keyword forms -----------------------------------


def test_every_copy_of_a_secret_in_a_text_is_masked() -> None:
    text = "postgres://admin:Sup3rS3cr3t!@db/prod, the db password being Sup3rS3cr3t!"
    out = Redactor().redact(text)
    assert "Sup3rS3cr3t" not in out
    assert out.count("[REDACTED:") == 2


def test_a_secret_found_once_is_masked_in_later_texts_of_the_turn() -> None:
    redactor = Redactor()
    redactor.redact("connect with postgres://admin:Sup3rS3cr3t!@db/prod")
    echo = redactor.redact("Sure: I used the password Sup3rS3cr3t! to connect.")
    assert "Sup3rS3cr3t" not in echo


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my password is Hunter2-Zebra", "Hunter2-Zebra"),
        ("The API key is 9fQ2xL7mR4tV8nC1", "9fQ2xL7mR4tV8nC1"),
        ("run mysql -u root -pSup3rS3cret shop", "Sup3rS3cret"),
        ("mysqldump -h db -p'Sup3rS3cret' shop", "Sup3rS3cret"),
        ("sshpass -p Sup3rS3cret ssh host", "Sup3rS3cret"),
        (f"aws_secret: {AWS_SECRET}", AWS_SECRET),
        (f"the key {AWS_SECRET} is old", AWS_SECRET),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
        (AZURE, "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg=="),
        (f"token {SHORT_JWT}", SHORT_JWT),
    ],
)
def test_keyword_forms_and_value_shapes_are_masked(text: str, secret: str) -> None:
    out = redact(text)
    assert secret.strip("'") not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "the password is required to log in",
        "your token is invalid, please log in again",
        "mysql -u root -p shop (it asks for the password)",
        "a 40 character hash 3f786850e387550fdab836ed7e6dc881de23001b stays",
        "the-quick-brown-fox-jumps-over-the-lazy-dog-again-and-again",
    ],
)
def test_ordinary_sentences_stay(text: str) -> None:
    assert find_secrets(text) == []
