"""Secret redaction: token formats, registered values, the logging filter, property 28."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given

from ollm_cli.base import redaction
from ollm_cli.base.redaction import (
    MIN_VALUE_LENGTH,
    TOKEN_KINDS,
    Redactor,
    default_redactor,
    find_secrets,
    redact,
)
from ollm_cli.cli.output import print_error
from ollm_cli.pipeline.environment._logging import RedactingFilter, configure_logging
from ollm_cli.pipeline.errors import ConfigError, OllmError, ToolError
from tests.environment.secret_strategies import filler, text_with_secret

GITHUB = "ghp_" + "a1B2" * 9
EXAMPLES = {
    "github": [GITHUB, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD"],
    "gitlab": ["glpat-abcdefghij0123456789"],
    "aws": ["AKIAIOSFODNN7EXAMPLE"],
    "google": ["AIzaSyA1234567890abcdefghijklmnopqrstuv", "ya29.a0AfH6SMBx1234567890abcdef"],
    "slack": [
        "xoxb-1234567890-abcdefghijABCDEF",
        "https://hooks.slack.com/services/T0/B0/XyZ123456",
    ],
    "stripe": ["sk_live_abcdefghijklmnop1234", "whsec_abcdefghijklmnopqrstuvwxyz12"],
    "anthropic": ["sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"],
    "openai": ["sk-proj-Abcdefghijklmnopqrst1234567890", "sk-" + "aB3" * 16],
    "huggingface": ["hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"],
    "npm": ["npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"],
    "pypi": ["pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejEyMzQ1"],
    "jwt": ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P"],
    "private-key": [
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF0000\n-----END PGP PRIVATE KEY BLOCK-----",
    ],
}


@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """Restore the root logger's handlers, filters and level after the test; OLLM's own
    handler, if an earlier test (an ``ollm`` command run in this process) left one, is
    set aside during the test, which installs its own."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    filters = {h: list(h.filters) for h in handlers}
    level = root.level
    earlier = [h for h in handlers if getattr(h, "_ollm_redacting", False)]
    for handler in earlier:
        root.removeHandler(handler)
    yield root
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in earlier:
        root.addHandler(handler)
    for handler, kept in filters.items():
        handler.filters[:] = kept
    root.setLevel(level)


@pytest.mark.parametrize(
    ("kind", "token"), [(k, t) for k, tokens in EXAMPLES.items() for t in tokens]
)
def test_each_token_format_is_found_and_masked(kind: str, token: str) -> None:
    text = f"before {token} after"
    matches = find_secrets(text)
    assert [m.kind for m in matches] == [kind]
    assert text[matches[0].start : matches[0].end] == token
    assert redact(text) == f"before [REDACTED:{kind}] after"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgres://app:s3cr3t@db:5432/app", "postgres://app:[REDACTED:url-password]@db:5432/app"),
        ("Authorization: Bearer abcdefghijklmnop123456", "Authorization: Bearer [REDACTED:bearer]"),
        ("password=hunter2hunter2", "password=[REDACTED:secret]"),
        ('{"api_key": "abc123def456"}', '{"api_key": "[REDACTED:secret]"}'),
        ("token=" + GITHUB, "token=[REDACTED:github]"),
    ],
)
def test_secret_parts_of_urls_headers_and_assignments(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b on main",
        "request 123e4567-e89b-12d3-a456-426614174000 failed",
        "see /home/alice/projects/ollm/pipeline/redaction.py line 12",
        "max_tokens=123456 token_budget: 2048 tokens: 99999999",
        "the task-management-system-for-everyone is in risk-assessment-framework-v2",
        "proxy at http://proxy.example.com:3128/ and tcp://127.0.0.1:2375",
        "SGVsbG8gV29ybGQhIFRoaXMgaXMgYSB0ZXN0Lg== is base64 of a greeting",
        "the key of the monkey is on the keyboard; a secret garden; a token of thanks",
        "sk-learn is a nickname, hf_hub_download is a function, npm_config_cache a variable",
        "Bearer 1234567890123456789012 is numeric",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


def test_token_kinds_are_documented() -> None:
    assert set(EXAMPLES) <= set(TOKEN_KINDS)
    assert {"url-password", "bearer", "secret"} <= set(TOKEN_KINDS)


def test_text_whose_lower_case_changes_length_is_still_scanned() -> None:
    # "İ".lower() is two characters: anchors cannot be found on a lowered copy.
    text = "İstanbul: password=hunter2hunter2, Authorization: Bearer abcdefghijklmnop123456"
    assert redact(text) == (
        "İstanbul: password=[REDACTED:secret], Authorization: Bearer [REDACTED:bearer]"
    )


def test_truncated_private_key_is_masked_to_the_end() -> None:
    text = "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n(truncated"
    assert redact(text) == "key: [REDACTED:private-key]"


def test_overlapping_matches_keep_the_longest() -> None:
    url = f"https://x-access-token:{GITHUB}@github.com/o/r.git"
    assert redact(url) == "https://x-access-token:[REDACTED:url-password]@github.com/o/r.git"


def test_registered_values_are_masked_by_name_or_kind() -> None:
    redactor = Redactor({"DB_PASSWORD": "correct-horse-battery", "SHORT": "abc"})
    assert redactor.value_count == 1
    assert (
        redactor.redact("login correct-horse-battery twice correct-horse-battery")
        == "login [REDACTED:env:DB_PASSWORD] twice [REDACTED:env:DB_PASSWORD]"
    )
    assert redactor.add_values(["another-secret-1", "  ", "another-secret-1"]) == 1
    assert redactor.add_values(["another-secret-1"]) == 0
    assert redactor.redact("x another-secret-1") == "x [REDACTED:value]"
    assert redactor.contains_secret("abc") is False
    assert redactor.contains_secret(GITHUB) is True


def test_longer_registered_value_wins_over_its_prefix() -> None:
    redactor = Redactor()
    redactor.add_values({"A": "secret-value", "B": "secret-value-longer"})
    assert redactor.redact("secret-value-longer") == "[REDACTED:env:B]"


def test_registered_values_shorter_than_the_minimum_are_ignored() -> None:
    redactor = Redactor(["x" * (MIN_VALUE_LENGTH - 1), "y" * MIN_VALUE_LENGTH])
    assert redactor.value_count == 1


def test_default_redactor_is_the_one_behind_redact() -> None:
    assert default_redactor() is redaction._default


@given(text_with_secret())
def test_redaction_is_idempotent_and_removes_the_secret(drawn: tuple[str, str, str]) -> None:
    kind, secret, text = drawn
    once = redact(text)
    assert secret not in once
    assert f"[REDACTED:{kind}]" in once
    assert redact(once) == once


@given(filler)
def test_prose_without_secrets_is_unchanged(text: str) -> None:
    assert redact(text) == text


def _capture_logger(name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.DEBUG)
    return log, stream


def _leaks(secret: str, shown: str) -> bool:
    """True when the secret, or any line of a multi-line one, is visible."""
    return any(part and part in shown for part in [secret, *secret.splitlines()])


@given(text_with_secret())
def test_property_28_sensitive_data_exclusion_from_errors(drawn: tuple[str, str, str]) -> None:
    """No log line and no user-facing error shows a secret (Requirement 10.7)."""
    _kind, secret, text = drawn
    log, stream = _capture_logger("pipeline.tests.property28")
    log.warning("tool failed: %s", text)
    log.error("config value %r rejected", {"value": text})
    try:
        raise ToolError(f"command failed: {text}", hint=f"retry without {text}")
    except ToolError:
        log.exception("while running a tool")
    logged = stream.getvalue()
    assert not _leaks(secret, logged)
    assert "[REDACTED:" in logged

    raw = io.BytesIO()
    err = io.TextIOWrapper(raw, encoding="utf-8")
    real = sys.stderr
    sys.stderr = err
    try:
        print_error(ToolError(f"command failed: {text}", hint=f"check {text}"))
        print_error(ConfigError(f"bad value {text}"), as_json=True)
        print_error(RuntimeError(text))
    finally:
        sys.stderr = real
    err.flush()
    shown = raw.getvalue().decode()
    assert not _leaks(secret, shown)
    assert "[REDACTED:" in shown


def test_filter_formats_arguments_then_redacts() -> None:
    log, stream = _capture_logger("pipeline.tests.filter")
    log.info("token %s for %d users", GITHUB, 3)
    assert stream.getvalue() == "token [REDACTED:github] for 3 users\n"


def test_filter_never_prints_raw_arguments_of_a_broken_call() -> None:
    log, stream = _capture_logger("pipeline.tests.broken")
    log.info("two placeholders %s %s", GITHUB)
    out = stream.getvalue()
    assert GITHUB not in out
    assert "could not be formatted" in out


def test_filter_redacts_stack_info() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "msg", None, None)
    record.stack_info = f"Stack (most recent call last):\n  secret {GITHUB}"
    assert RedactingFilter(Redactor()).filter(record)
    assert GITHUB not in (record.stack_info or "")


def test_configure_logging_installs_one_redacting_stderr_handler(
    root_logging: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("INFO")
    configure_logging(logging.INFO)
    ours = [h for h in root_logging.handlers if getattr(h, "_ollm_redacting", False)]
    assert len(ours) == 1
    assert all(
        any(isinstance(f, RedactingFilter) for f in h.filters) for h in root_logging.handlers
    )
    logging.getLogger("cli.tests.anything").info("using key %s", GITHUB)
    logging.getLogger("cli.tests.anything").debug("not shown at INFO")
    err = capsys.readouterr().err
    assert "INFO cli.tests.anything: using key [REDACTED:github]" in err
    assert GITHUB not in err
    assert "not shown" not in err
    handler = ours[0]
    assert isinstance(handler, logging.StreamHandler)
    assert handler.stream is sys.stderr
    handler.stream = io.StringIO()  # the handler follows sys.stderr whatever it is given
    assert handler.stream is sys.stderr


def test_configure_logging_reads_the_level_from_the_environment(
    root_logging: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_LOG_LEVEL", "debug")
    configure_logging()
    assert root_logging.level == logging.DEBUG
    monkeypatch.setenv("OLLM_LOG_LEVEL", "15")
    configure_logging()
    assert root_logging.level == 15
    monkeypatch.delenv("OLLM_LOG_LEVEL")
    configure_logging()
    assert root_logging.level == logging.WARNING


def test_bad_log_level_in_the_environment_warns_and_uses_warning(
    root_logging: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OLLM_LOG_LEVEL", "chatty")
    configure_logging()
    assert root_logging.level == logging.WARNING
    assert "OLLM_LOG_LEVEL='chatty' is not a log level" in capsys.readouterr().err


def test_bad_explicit_log_level_is_a_config_error(root_logging: logging.Logger) -> None:
    with pytest.raises(ConfigError, match="unknown log level 'LOUD'") as caught:
        configure_logging("LOUD")
    assert isinstance(caught.value, OllmError)
    assert "DEBUG" in (caught.value.hint or "")
