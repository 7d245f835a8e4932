"""Running ``ollm sessions`` in tests: in-process through ``CliRunner``, or as a real process.

``invoke`` maps an escaping :class:`~ollm_cli.pipeline.errors.OllmError` the way
``ollm_cli.cli.app.main`` does (its exit code, its message on stderr), so tests assert
on what a user sees. ``run_ollm`` starts a real ``python`` that mounts the
sessions group on the real ``ollm`` app and runs its ``main``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ollm_cli.cli.exit_codes import exit_code_for
from ollm_cli.cli.sessions import app
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session

REPO = Path(__file__).resolve().parents[2]

# The console entry point, as the `ollm` script runs it: exit codes and error output are
# the real ones.
OLLM_SCRIPT = "from ollm_cli.cli.app import main\nmain()\n"


@contextlib.contextmanager
def ollm_env(
    runtime: str,
    server_url: str,
    home: Path,
    cwd: Path,
    *,
    check_stop: bool = True,
    **extra: str,
) -> Iterator[dict[str, str]]:
    """The variables of an ``ollm`` process talking to the fake Ollama server at
    ``server_url`` on ``runtime`` (``service`` or ``inprocess``), plus ``extra``; on
    the service, the local service (its own Ray head in ``home``) is stopped after."""
    values = dict(os.environ)
    values.update(
        {
            "OLLM_HOME": str(home),
            "OLLM_PROVIDER": "ollama",
            "OLLM_OLLAMA_HOST": server_url,
            "OLLM_MODEL": "llama3.2:latest",
            "OLLM_RUNTIME__KIND": runtime,
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "NO_COLOR": "1",
            **extra,
        }
    )
    yield values
    if runtime == "service":
        stopped = subprocess.run(
            [sys.executable, "-c", OLLM_SCRIPT, "service", "stop"],
            env=values,
            cwd=cwd,
            capture_output=True,
            timeout=180,
        )
        assert stopped.returncode == 0 or not check_stop, stopped.stderr


@dataclass
class Outcome:
    """What a command printed and how it exited."""

    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None


def invoke(*args: str, input: str | None = None) -> Outcome:
    """Run ``ollm sessions ARGS`` in this process, mapping errors like ``main`` does."""
    result = CliRunner().invoke(app, list(args), input=input)
    error = result.exception
    if isinstance(error, OllmError):
        return Outcome(exit_code_for(error), result.stdout, result.stderr + str(error), error)
    if error is not None and not isinstance(error, SystemExit):
        raise error
    return Outcome(result.exit_code, result.stdout, result.stderr)


def run_ollm(
    *args: str, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``ollm sessions ARGS`` as a real process (stdin is not a terminal)."""
    return subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, "sessions", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def open_test_store() -> Callable[[], ChatRecordingService]:
    """A function opening the store the commands use (close it before invoking them)."""

    def opener() -> ChatRecordingService:
        settings = loaded_settings().settings
        return ChatRecordingService(
            settings.services.session, snapshots_dir=settings.snapshots.data_dir
        )

    return opener


@pytest.fixture
def seed(open_test_store: Callable[[], ChatRecordingService]) -> Callable[..., list[str]]:
    """Record ``sessions`` in the store (through ``import_session``) and return their ids."""

    def seeder(*sessions: Session) -> list[str]:
        store = open_test_store()
        try:
            return [store.import_session(s) for s in sessions]
        finally:
            store.close()

    return seeder


@pytest.fixture
def sessions_dir(ollm_home: Path) -> Iterator[Path]:
    """The folder session files live in."""
    yield loaded_settings().settings.services.session.data_dir
