"""Issue 23: what follows a secret's key is masked only when it is a literal, not code."""

from __future__ import annotations

import pytest

from ollm_cli.base.secret_literals import (
    assigned_secret,
    bare_secret,
    literal_secret,
    secret_key,
)


@pytest.mark.parametrize(
    ("key", "named"),
    [
        ("csrfToken", True),
        ("DB_PASSWORD", True),
        ("api_key", True),
        ("privateKey", True),
        ("PGPASSWORD", True),
        ("tokenizer", False),
        ("tokens", False),
        ("token_url", False),
        ("secret_name", False),
        ("password_file", False),
        ("api_key_id", False),
        ("monkey_key", False),
        ("__", False),
    ],
)
def test_a_key_names_a_secret_by_a_whole_word(key: str, named: bool) -> None:
    assert secret_key(key) is named


def _value(text: str) -> str | None:
    """The secret assigned in ``text`` (whose operator is the first ``=`` or ``:``)."""
    at = min(i for i in (text.find("="), text.find(":")) if i != -1) + 1
    span = assigned_secret(text, at, line_start=True)
    return None if span is None else text[span[0] : span[1]]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('password = "Sup3r-Secret"', "Sup3r-Secret"),
        ('password: str = "c0rrect-h0rse"', "c0rrect-h0rse"),
        ("password: Optional[str] = 'Tr0ub4dor&3'", "Tr0ub4dor&3"),
        ("token := 'Zx8Qm2Lp7Vr4Kt9N'", "Zx8Qm2Lp7Vr4Kt9N"),
        ("'password' => 'P@ssw0rd-2024',", "P@ssw0rd-2024"),
        ('secret = "esc\\"aped-9x"', 'esc\\"aped-9x'),
        ('api_key = "Ab3dE9fGh1jK', "Ab3dE9fGh1jK"),  # cut off before its quote closes
        ("DB_PASSWORD=hunter2", "hunter2"),
        ("password = hunter2", "hunter2"),
    ],
)
def test_literal_values_are_secrets(text: str, secret: str) -> None:
    assert _value(text) == secret


@pytest.mark.parametrize(
    "text",
    [
        "password == 'Sup3r-Secret'",
        "password != 'Sup3r-Secret'",
        "token =~ /abc123/",
        "token::Token::new(9)",
        "password: SecretStr = Field(...)",
        "token = Base.url_encode64(data)",
        "api_key = keys[0]",
        'api_key = "abc',  # cut off, and too short
        'password = "',
        "password =",
        "password = $DB_PASSWORD",
        "password = next_token",
        "secret = ${{ secrets.X }}",
        "password = 'Password'",
        "password = '/run/secrets/db'",
        "token = 'https://auth.example.com/token'",
        "token = 'YOUR_TOKEN_HERE'",
        "token = '1.2.3'",
        "password = 'aaaaaaaa'",
        "password = 'two words1'",
        "private_key = 'server.key'",
        "password = None",
        "token = @token",
    ],
)
def test_code_and_non_secrets_are_left_alone(text: str) -> None:
    assert _value(text) is None


def test_a_bare_value_in_the_middle_of_a_line_is_code_when_it_reads_like_a_name() -> None:
    assert bare_secret("token2") is False
    assert bare_secret("token2", config="spaced") is True
    assert bare_secret("db_pass_2", config="spaced") is False
    assert bare_secret("db_pass_2", config="tight") is True
    assert literal_secret("C:\\keys\\id_rsa") is False
