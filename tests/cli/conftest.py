"""Running ``ollm sessions`` in tests: in-process through ``CliRunner``, or as a real process.

``invoke`` maps an escaping :class:`~ollm_cli.pipeline.errors.OllmError` the way
``ollm_cli.cli.app.main`` does (its exit code, its message on stderr), so tests assert
on what a user sees. ``run_ollm`` starts a real ``python`` that mounts the
sessions group on the real ``ollm`` app and runs its ``main``.

The user-facing tests run on each runtime a user can choose (``ollm_env``). On the
local service they share one service (``shared_service``): starting a Ray head and
the daemon under coverage took several seconds per test. What is shared is only the
daemon and its Ray head; each test keeps its own ``OLLM_HOME`` (sessions, history,
trust, rescue) and its own workspace, so the service gives it a pipeline host of its
own (hosts are keyed by configuration and workspace, and an idle one is retired).
Tests of the service's own start, stop and death keep their own service
(``tests/service``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil
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


SHARED_IDLE_TIMEOUT_S = "90"
"""How long the shared service keeps a finished test's pipeline host (and itself, with
no client at all): a few hosts at a time, not one per test of the session, and long
enough that the service outlives the in-process tests run between its own."""


def _ollm_command(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``ollm ARGS`` as a real process with ``home`` as ``OLLM_HOME`` and none of the
    test's other ``OLLM_*`` variables."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
    values.update(
        {
            "OLLM_HOME": str(home),
            "OLLM_RUNTIME__SERVICE__IDLE_TIMEOUT": SHARED_IDLE_TIMEOUT_S,
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
        }
    )
    return subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, *args],
        env=values,
        cwd=home,
        capture_output=True,
        timeout=180,
    )


def _dead_service(home: Path) -> str | None:
    """What is wrong with the service of ``home`` after a test: a state file naming a
    process that is gone (the daemon died); ``None`` when it runs, or stopped cleanly
    (idle: it removes its state file)."""
    pid = _state_pid(home)
    if pid is None or _alive(pid):
        return None
    log = home / "service" / "service.log"
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
    return f"the shared service (pid {pid}) died during the test; its log ends:\n{tail}"


@pytest.fixture(scope="session")
def shared_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The home of the local service the user-facing tests share (see the module),
    started at once and stopped (cleanly: exit 0) when the session ends."""
    home = tmp_path_factory.mktemp("service-home")
    started = _ollm_command(home, "service", "start")
    assert started.returncode == 0, started.stderr.decode(errors="replace")
    yield home
    stopped = _ollm_command(home, "service", "stop")
    assert stopped.returncode == 0, stopped.stderr.decode(errors="replace")


def shared_for(request: pytest.FixtureRequest, runtime: str) -> Path | None:
    """``shared_service`` for a test on the service, ``None`` on another runtime (so
    tests that run only in-process start no service) and for a test marked
    ``own_service`` (one that asserts what its home's service did, or that none started)."""
    if runtime != "service" or request.node.get_closest_marker("own_service") is not None:
        return None
    shared: Path = request.getfixturevalue("shared_service")
    pid = _state_pid(shared)
    if pid is None or not _alive(pid):
        # it stopped itself, idle (SHARED_IDLE_TIMEOUT_S) while this worker ran other
        # tests: started again here, so the test's first command does not announce it
        started = _ollm_command(shared, "service", "start")
        assert started.returncode == 0, started.stderr.decode(errors="replace")
    return shared


def _state_pid(home: Path) -> int | None:
    """The daemon the state file of ``home``'s service names; ``None`` without one (the
    service stopped cleanly, or never started)."""
    try:
        return int(orjson.loads((home / "service" / "state.json").read_bytes())["pid"])
    except FileNotFoundError:
        return None


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def join_shared_service(home: Path, shared: Path) -> dict[str, str]:
    """Make the commands of ``home`` reach the service of ``shared`` (its service folder
    is that service's); the variables they need for it."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "service").symlink_to(shared / "service", target_is_directory=True)
    return {"OLLM_RUNTIME__SERVICE__IDLE_TIMEOUT": SHARED_IDLE_TIMEOUT_S}


def assert_service_alive(shared: Path) -> None:
    """Fail when the shared service died during the test (see ``_dead_service``)."""
    problem = _dead_service(shared)
    assert problem is None, problem


@contextlib.contextmanager
def ollm_env(
    runtime: str,
    server_url: str,
    home: Path,
    cwd: Path,
    *,
    shared: Path | None = None,
    check_stop: bool = True,
    **extra: str,
) -> Iterator[dict[str, str]]:
    """The variables of an ``ollm`` process talking to the fake Ollama server at
    ``server_url`` on ``runtime`` (``service`` or ``inprocess``), plus ``extra``.

    On the service with ``shared`` (the home of ``shared_service``), ``home``'s service
    folder is that service's, so its commands reach it; the service must still be
    alive after the test (``check_stop``), a test that killed or broke it fails.
    Without ``shared``, the test's own service (its own Ray head in ``home``) is
    started by its first command and stopped after the test."""
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
    if runtime == "service" and shared is not None:
        values.update(join_shared_service(home, shared))
    yield values
    if runtime != "service":
        return
    if shared is not None:
        problem = _dead_service(shared)
        assert problem is None or not check_stop, problem
        return
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
