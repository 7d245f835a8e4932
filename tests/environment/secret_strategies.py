"""Hypothesis strategies for realistic credentials of every token format we detect.

Each strategy draws ``(kind, secret, text)``: ``secret`` is the part that must
never be shown, ``text`` is how it appears in the wild (``secret`` alone, or
inside a URL, header or assignment).
"""

from __future__ import annotations

import re
import string

from hypothesis import assume
from hypothesis import strategies as st

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "_-"
UPPER_DIGITS = string.ascii_uppercase + string.digits


def _chars(alphabet: str, size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=max_size or size)


def _mixed(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """Random tokens always hold an upper case letter, a lower case letter and a digit."""
    return _chars(alphabet, size - 3).map(lambda s: "A7b" + s)


def _plain(kind: str, strategy: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str, str]]:
    return strategy.map(lambda secret: (kind, secret, secret))


SECRET_FORMATS: dict[str, st.SearchStrategy[tuple[str, str, str]]] = {
    "github": _plain(
        "github",
        st.one_of(
            st.tuples(st.sampled_from("pousr"), _chars(ALNUM, 36, 60)).map(
                lambda t: f"gh{t[0]}_{t[1]}"
            ),
            _chars(ALNUM + "_", 22, 80).map(lambda s: "github_pat_" + s),
        ),
    ),
    "gitlab": _plain("gitlab", _chars(B64URL, 20, 40).map(lambda s: "glpat-" + s)),
    "aws": _plain(
        "aws",
        st.tuples(st.sampled_from(["AKIA", "ASIA"]), _chars(UPPER_DIGITS, 16)).map("".join),
    ),
    "google": _plain(
        "google",
        st.one_of(
            _chars(B64URL, 35).map(lambda s: "AIza" + s),
            _chars(B64URL, 20, 60).map(lambda s: "ya29." + s),
        ),
    ),
    "slack": _plain(
        "slack",
        st.tuples(st.sampled_from("bpa"), _chars(string.digits, 10, 12), _chars(ALNUM, 16, 24)).map(
            lambda t: f"xox{t[0]}-{t[1]}-{t[2]}"
        ),
    ),
    "stripe": _plain(
        "stripe",
        st.tuples(st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]), _chars(ALNUM, 24, 40)).map(
            "".join
        ),
    ),
    "openai": _plain(
        "openai",
        st.tuples(st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-"]), _mixed(B64URL, 40)).map(
            "".join
        ),
    ),
    "anthropic": _plain("anthropic", _chars(B64URL, 40, 90).map(lambda s: "sk-ant-api03-" + s)),
    "huggingface": _plain(
        "huggingface",
        _chars(string.ascii_letters, 32).map(lambda s: "hf_Ab" + s),
    ),
    "npm": _plain("npm", _mixed(ALNUM, 36).map(lambda s: "npm_" + s)),
    "pypi": _plain("pypi", _chars(B64URL, 50, 120).map(lambda s: "pypi-AgEIcHlwaS5vcmc" + s)),
    "jwt": _plain(
        "jwt",
        st.tuples(_chars(B64URL, 10, 40), _chars(B64URL, 10, 80), _chars(B64URL, 10, 60)).map(
            lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"
        ),
    ),
    "private-key": st.tuples(
        st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]),
        st.lists(_chars(ALNUM + "+/", 20, 64), min_size=1, max_size=4),
    ).map(
        lambda t: (
            "private-key",
            "\n".join(t[1]),
            f"-----BEGIN {t[0]}PRIVATE KEY-----\n"
            + "\n".join(t[1])
            + f"\n-----END {t[0]}PRIVATE KEY-----",
        )
    ),
    "url-password": st.tuples(
        st.sampled_from(["postgres", "https", "redis", "amqp"]),
        _chars(string.ascii_lowercase, 1, 10),
        # not a placeholder: ``$DB_PASS`` or ``******`` is filled in later
        _chars(ALNUM + "!$*+-._~", 6, 30).filter(lambda p: not re.fullmatch(r"\$[A-Z_]+|\*+", p)),
        _chars(string.ascii_lowercase, 2, 12),
    ).map(lambda t: ("url-password", t[2], f"{t[0]}://{t[1]}:{t[2]}@{t[3]}.example.com/db")),
    "bearer": _mixed(B64URL + ".", 24).map(lambda s: ("bearer", s, f"Authorization: Bearer {s}")),
    "secret": st.tuples(
        st.sampled_from(["password", "DB_PASSWORD", "client_secret", "api_key", "token"]),
        st.sampled_from(["=", ": ", " = ", '": "']),
        # A literal: no "." (``a7b.cdef`` is an attribute of code), no "xxxx" (a placeholder).
        _mixed(ALNUM + "!#$%*+-/", 12).filter(lambda v: "xxxx" not in v.lower()),
    ).map(lambda t: ("secret", t[2], f"{t[0]}{t[1]}{t[2]}")),
}

any_secret = st.one_of(*SECRET_FORMATS.values())

#: Ordinary prose around a secret: no character that could extend a token.
filler = st.text(
    alphabet=string.ascii_letters + string.digits + " .,!?()\n", min_size=0, max_size=60
)
separator = st.sampled_from([" ", "\n", " (", ", ", "\t"])


@st.composite
def text_with_secret(draw: st.DrawFn) -> tuple[str, str, str]:
    """``(kind, secret, text)`` where ``text`` holds the secret amid ordinary words."""
    kind, secret, shown = draw(any_secret)
    before, after = draw(filler), draw(filler)
    text = f"{before}{draw(separator)}{shown}{draw(separator)}{after}"
    # The secret must appear once: a filler or user name equal to it is no leak.
    pieces = [secret, *secret.splitlines()]
    assume(text.count(secret) == 1)
    assume(not any(piece in part for piece in pieces for part in (before, after)))
    return kind, secret, text
