"""OLLM's warnings reach the terminal once, in our words: a ``warning:`` line, never a
raw ``WARNING ollm_cli.x:`` line, never twice."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.cli.log_lines import TerminalLogHandler
from tests.cli.conftest import OLLM_SCRIPT


@pytest.fixture
def handler() -> Iterator[TerminalLogHandler]:
    """The terminal handler alone on the root logger (earlier tests that ran ``main``
    left theirs there), at WARNING."""
    installed = TerminalLogHandler()
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers = [installed]
    root.setLevel(logging.WARNING)
    try:
        yield installed
    finally:
        root.handlers = saved
        root.setLevel(level)


def test_a_warning_is_one_line_in_our_words_and_never_twice(
    handler: TerminalLogHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = logging.getLogger("ollm_cli.config.loader")
    for _ in range(2):
        ours.warning("ignoring environment variable %s: it names no config key", "OLLM_X")
    logging.getLogger("httpx").error("connection reset")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "warning: ignoring environment variable OLLM_X: it names no config key",
        "error: httpx: connection reset",
    ]


def test_the_real_command_warns_once_without_a_raw_logger_line(
    tmp_path: Path, ollm_home: Path
) -> None:
    workspace = tmp_path / "repo"
    (workspace / ".ollm").mkdir(parents=True)
    (workspace / ".ollm" / "config.yaml").write_text(
        "hooks:\n  - {event: session:start, command: echo hi}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, "sessions", "list"],
        cwd=workspace,
        env={**os.environ, "OLLM_HOME": str(ollm_home), "OLLM_SERVICES__NOPE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr and "ollm_cli." not in done.stderr
    assert done.stderr.count("warning:") == 2, done.stderr
    assert done.stderr.count("this folder is not trusted") == 1
    assert "warning: ignoring environment variable OLLM_SERVICES__NOPE" in done.stderr
