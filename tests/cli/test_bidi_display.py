"""``sessions list`` and ``sessions view`` show no bidirectional control (issue 27)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ollm_cli.pipeline.records import SessionMessage
from tests.cli.conftest import invoke
from tests.cli.session_strategies import make_session

Seed = Callable[..., list[str]]
TITLE = "invoice\u202efdp.exe \u2066isolated\u2069 \u200fmark\u061c"


@pytest.mark.parametrize("command", ["list", "view"])
def test_sessions_list_and_view_strip_bidi_controls(seed: Seed, command: str) -> None:
    [sid] = seed(
        make_session(
            [SessionMessage.user(f"look at {TITLE}"), SessionMessage.assistant(f"ok {TITLE}")],
            title=TITLE,
        )
    )
    out = invoke(command, *([sid] if command == "view" else []))
    assert out.exit_code == 0, out.stderr
    shown = out.stdout
    assert "invoicefdp.exe" in shown
    for char in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c":
        assert char not in shown
