"""Issue 23: redaction changes only secrets, measured on the two corpora of redaction_corpus."""

from __future__ import annotations

import pytest

from ollm_cli.pipeline.environment import Redactor
from tests.environment.redaction_corpus import CLEAN, SECRETS


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_code_comes_out_byte_identical(name: str) -> None:
    text = CLEAN[name]
    assert Redactor().redact(text) == text


def test_the_whole_clean_corpus_through_one_redactor_changes_no_byte() -> None:
    """One turn holding every sample: nothing learned from one sample masks another."""
    redactor = Redactor()
    for _ in range(2):
        for name, text in CLEAN.items():
            assert redactor.redact(text) == text, name


@pytest.mark.parametrize(("name", "text", "secrets"), SECRETS, ids=[s[0] for s in SECRETS])
def test_every_secret_is_masked(name: str, text: str, secrets: tuple[str, ...]) -> None:
    out = Redactor().redact(text)
    assert "[REDACTED:" in out
    for secret in secrets:
        assert secret not in out, name


def test_the_corpora_cover_many_shapes() -> None:
    assert len(CLEAN) >= 20
    assert sum(len(text) for text in CLEAN.values()) >= 8000
    assert len(SECRETS) >= 35


def test_a_secret_learned_in_a_turn_masks_only_whole_copies() -> None:
    redactor = Redactor()
    redactor.redact("postgres://u:Zq7-pass-91@db")
    assert redactor.redact("typed Zq7-pass-91 again") == "typed [REDACTED:url-password] again"
    assert redactor.redact("xZq7-pass-912 is another") == "xZq7-pass-912 is another"
    assert redactor.redact("branch Zq7-pass-91-docs") == "branch Zq7-pass-91-docs"


def test_a_value_that_is_code_is_never_learned() -> None:
    redactor = Redactor()
    first = "password: SecretStr = Field(default=...)\nname: str = Field(default='x')"
    assert redactor.redact(first) == first
    assert redactor.redact("token = Field(...)") == "token = Field(...)"


def test_learned_secrets_are_forgotten_at_the_end_of_a_turn() -> None:
    redactor = Redactor()
    redactor.redact("my password is Hunter2-Zebra")
    assert "Hunter2-Zebra" not in redactor.redact("echo Hunter2-Zebra")
    redactor.forget_learned()
    assert redactor.redact("echo Hunter2-Zebra") == "echo Hunter2-Zebra"


@pytest.mark.parametrize(
    "text",
    [
        "class V1OrganizationExternalKeysPostRequestAws(TypedDict):",
        "see github.com/Mai0313/VibeCodingTracker/issues/new",
        "/Mai0313/VibeCodingTracker/issues/new/x12",
    ],
)
def test_names_and_paths_of_forty_characters_are_not_aws_secrets(text: str) -> None:
    assert Redactor().redact(text) == text


def test_a_bare_aws_secret_is_still_found() -> None:
    secret = "Tq9Lm2Xv7Rk4Pz8Wn1Yb6Hs3Jd5Gf0AcE/Ur+Ki2"
    assert Redactor().redact(f"old key {secret} here") == "old key [REDACTED:aws-secret] here"


def test_a_key_after_an_escaped_newline_is_still_a_key() -> None:
    text = repr("\napi_key=A7b000000000 ")
    assert "A7b000000000" not in Redactor().redact(text)


def test_redact_counted_says_how_many_secrets_it_masked() -> None:
    text = "already [REDACTED:secret] here;\nDB_PASSWORD=hunter2\nand my password is Zq7-pass-91"
    out, count = Redactor().redact_counted(text)
    assert count == 2
    assert out == (
        "already [REDACTED:secret] here;\nDB_PASSWORD=[REDACTED:secret]\n"
        "and my password is [REDACTED:spoken-secret]"
    )
    assert Redactor().redact_counted("nothing here") == ("nothing here", 0)
