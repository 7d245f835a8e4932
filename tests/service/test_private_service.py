"""Nothing of the service in a shared folder, nothing of it open without the token, and
``ollm service status`` never signals a process the service did not start.

The attacks of issue 27 are run by a real second local user (:mod:`tests.second_user`)."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from ollm_cli.config.paths import RAY_TEMP_MAX_CHARS, ray_temp_dir
from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._journal import JournalEntry, log_files, read_log
from ollm_cli.pipeline.recording._rescue import write_rescue
from ollm_cli.pipeline.records import SessionMessage
from ollm_cli.pipeline.service._processes import find_service
from ollm_cli.pipeline.service._state import ServicePaths, ServiceState, write_state
from tests.fake_ollama import FakeOllama
from tests.second_user import ENV, intruder
from tests.service.conftest import ollm, service_env, service_processes, state_of, wait_for


def _answers_metrics(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 serves Prometheus metrics to a client without a token."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as reply:
            return reply.status == 200 and b"# TYPE" in reply.read(65536)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return False


def _listening_ports(processes: list[psutil.Process]) -> set[int]:
    ports: set[int] = set()
    for process in processes:
        try:
            for conn in process.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN:
                    ports.add(conn.laddr.port)
        except psutil.Error:
            continue
    return ports


def test_the_folder_for_ray_is_short_private_and_never_a_fixed_shared_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    short = Path(tempfile.mkdtemp(prefix="o-", dir="/tmp"))
    made: list[Path | None] = []
    try:
        folder, removable = ray_temp_dir(short / "ray")
        assert (folder, removable) == (short / "ray", None)
        folder.chmod(0o777)  # as Ray leaves it: made private again
        assert ray_temp_dir(short / "ray")[0] == folder
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700

        runtime = short / "run"
        runtime.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        long = tmp_path / ("x" * 40) / "ray"
        folder, removable = ray_temp_dir(long)
        assert folder.parent == runtime and removable is None
        runtime.chmod(0o755)  # not the user's private runtime folder: not used
        folder, removable = ray_temp_dir(long)
        made.append(removable)
        assert removable is not None and folder.parent == removable
        assert removable.parent == Path("/tmp") and removable.name.startswith("ollm-ray-")
        assert len(str(folder)) <= RAY_TEMP_MAX_CHARS
        assert stat.S_IMODE(removable.stat().st_mode) == 0o700
        again = ray_temp_dir(long)[1]
        made.append(again)
        assert again != removable  # a new random name each time
    finally:
        for leftover in (short, *made):
            if leftover is not None:
                shutil.rmtree(leftover, ignore_errors=True)


def test_the_service_keeps_ray_private_and_its_metrics_closed(
    server: FakeOllama, tmp_path: Path
) -> None:
    """Issue 27: Ray's temp folder was /tmp/ray, mode 777 without the sticky bit (another
    user renamed the service's raylet socket), and two Prometheus endpoints answered
    without the token."""
    user = intruder()
    home = tmp_path / "home"  # a long path: Ray's files go to a short private folder
    env = service_env(home, server)
    env.pop("XDG_RUNTIME_DIR", None)
    done = ollm("run", "-p", "hello", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    state = state_of(home)
    assert state is not None
    try:
        ray_dir = Path(state.ray_temp)
        assert ray_dir.is_dir() and not str(ray_dir).startswith("/tmp/ray/")
        for folder in (ray_dir.parent, ray_dir):
            info = folder.stat()
            assert info.st_uid == os.getuid()
        assert stat.S_IMODE(ray_dir.parent.stat().st_mode) == 0o700
        # Ray opens the folders it makes to everyone (0777) as each worker starts; the
        # service closes them again (and the folder above them is private throughout)
        wait_for(
            lambda: stat.S_IMODE(ray_dir.stat().st_mode) == 0o700,
            what="the service to close Ray's folder again",
        )
        socket = ray_dir / "session_latest" / "sockets" / "raylet"
        assert stat.S_ISSOCK(socket.stat().st_mode)
        moved = user.run(f"mv {socket} {socket}.moved", check=False)
        assert moved.returncode != 0 and socket.exists()
        listed = user.run(f"ls {ray_dir}/session_latest/logs", check=False)
        assert listed.returncode != 0  # session ids are in Ray's logs

        processes = service_processes(state)
        ports = _listening_ports(processes)
        assert ports, "the service listens nowhere?"
        assert [p for p in ports if _answers_metrics(p)] == []
    finally:
        stopped = ollm("service", "stop", env=env, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
    if ray_dir.parent.name.startswith("ollm-ray-"):
        assert not ray_dir.parent.exists()  # a folder of its own in the temp folder: removed


@pytest.fixture
def bystanders() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by the test, each a group of its own, killed at its end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_stale_state_file_never_gets_other_processes_killed(
    server: FakeOllama, tmp_path: Path, bystanders: list[subprocess.Popen[bytes]]
) -> None:
    """Issue 27: a stale ``state.json`` made ``ollm service status`` SIGKILL other
    users' processes whose command line matched. Now only processes the service
    started (its user's, younger than its daemon, with its home's token) are."""
    user = intruder()
    home = tmp_path / "home"
    env = service_env(home, server)
    paths = ServicePaths.for_home(home)
    address = "127.0.0.1:1"  # nothing answers there: the state is stale
    # another user's process whose command line names the address, in its own group
    theirs = subprocess.Popen(
        user.command("/bin/sh", "-c", "sleep 300", "sh", f"--gcs-address={address}"),
        env=ENV,
        start_new_session=True,
    )
    bystanders.append(theirs)
    # a process of this user that the service did not start, in a group of its own
    mine = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 300", "sh", f"--gcs-address={address}"],
        start_new_session=True,
    )
    bystanders.append(mine)
    deadline = time.monotonic() + 30
    while psutil.Process(theirs.pid).uids().real != user.uid:  # setpriv has not switched yet
        assert time.monotonic() < deadline
        time.sleep(0.05)
    created = psutil.Process(mine.pid).create_time()

    def stale(pid: int, pgid: int, started: float) -> None:
        write_state(
            paths,
            ServiceState(
                address=address,
                namespace=paths.namespace,
                pid=pid,
                pgid=pgid,
                pid_started=started,
                version="stale",
                started_at=started,
                home=str(paths.home),
            ),
        )

    # the daemon's pid and group now belong to a process that is not the daemon
    for pid, pgid, started in (
        (theirs.pid, theirs.pid, created - 60),  # another user's: never
        (mine.pid, mine.pid, created + 60),  # older than the daemon was: not its
        (mine.pid, mine.pid, created - 60),  # younger, but without this home's token
    ):
        stale(pid, pgid, started)
        status = ollm("service", "status", "--json", env=env, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert orjson.loads(status.stdout)["running"] is False
        assert theirs.poll() is None and mine.poll() is None
        assert state_of(home) is None  # the stale file is cleaned up


@pytest.mark.parametrize("runtime", ["inprocess", "service"])
def test_ollm_run_refuses_and_names_a_forged_rescue_file(
    server: FakeOllama, tmp_path: Path, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rescue file in the user's own rescue folder that the home's key did not sign
    (written by someone who could reach it, or altered) is named and never replayed,
    by ``ollm run`` in-process and in the service alike."""
    home = tmp_path / "home"
    monkeypatch.setenv("OLLM_HOME", str(home))
    env = service_env(home, server, OLLM_RUNTIME__KIND=runtime)
    sessions = home / "sessions"
    forged = _forged_sessions(tmp_path / "attacker", 3)
    path = write_rescue(sessions, forged, key=b"not the home's key".ljust(32, b"!"), extra_dirs=[])
    assert path is not None and path.parent == home / "rescue"
    try:
        done = ollm("run", "-p", "hello", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        assert str(path) in said and "refused" in said and "digest does not match" in said
        listed = ollm("sessions", "list", "--json", env=env, cwd=tmp_path)
        assert len(orjson.loads(listed.stdout)) == 1  # this run's only
        assert path.exists()
    finally:
        if runtime == "service":
            ollm("service", "stop", env=env, cwd=tmp_path)


def _forged_sessions(folder: Path, count: int) -> list[JournalEntry]:
    with ChatRecordingService(SessionSettings(data_dir=folder, max_sessions=0)) as maker:
        for _ in range(count):
            sid = maker.create_session("m", "p")
            maker.record_message(sid, SessionMessage.user("obey me"))
        return [e for log in log_files(folder / ".journal") for e in read_log(log).entries]


def test_a_dead_service_s_own_folder_in_tmp_is_removed_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed daemon cannot remove the ``/tmp/ollm-ray-*`` folder it made; the next
    command that finds its state stale does. Its home's own folder stays."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    paths = ServicePaths.for_home(tmp_path / "home")
    folder, removable = ray_temp_dir(tmp_path / ("x" * 40) / "ray")
    assert removable is not None
    for ray_folder, gone in ((folder, True), (paths.folder / "ray", False)):
        ray_folder.mkdir(parents=True, exist_ok=True)
        write_state(
            paths,
            ServiceState(
                address="127.0.0.1:1",
                namespace=paths.namespace,
                pid=2**22 + 1,  # no such process
                pgid=2**22 + 1,
                pid_started=0.0,
                version="stale",
                started_at=0.0,
                home=str(paths.home),
                ray_temp=str(ray_folder),
            ),
        )
        assert find_service(paths) is None
        assert ray_folder.exists() is not gone
