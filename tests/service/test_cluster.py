"""``ollm run --ray-address``: a thin client of the pipeline host on a Ray cluster.

The test starts a Ray head of its own (``ray start --head`` on 127.0.0.1, token
authentication with a token of its own, ports of Ray's choosing, a private temp
folder) and stops exactly its processes after (never ``ray stop``, which would
stop every Ray of the machine). The conversation must live in the cluster, as it does in
the local service: the named detached pipeline host in the home's namespace,
found again by the next command (``--continue``), and no local service started.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ollm_cli.pipeline.service._state import CLUSTER_REFUSED, ServicePaths, read_state
from tests.ray_node import HEAD_PORTS, RAY_CLI, head_address
from tests.service.conftest import OLLM, REPO


def _stop(leader: subprocess.Popen[bytes], address: str) -> None:
    """Stop the processes of our head: its session, and the workers that name it.
    Killed, not asked: `ray start --block` took the whole 5 s it was given to stop
    on SIGTERM, and its temp folder is removed after anyway."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(leader.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=5)
    for process in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error, OSError):
            cmdline = " ".join(process.info.get("cmdline") or [])
            if os.getsid(process.pid) == leader.pid or (address and address in cmdline):
                process.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A token-authenticated Ray head on 127.0.0.1: its address and a client's variables.
    One per module (a head takes ~20 s to start here): each test's home is its own
    namespace on it, and a refused client leaves nothing there."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    temp = tempfile.mkdtemp(prefix="ollm-rc-", dir="/tmp")  # short: Ray's sockets live there
    token = tmp_path / "cluster-token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", **auth}
    env.pop("RAY_ADDRESS", None)
    args = ["--head", *HEAD_PORTS, "--node-ip-address", "127.0.0.1", "--temp-dir", temp]
    args += ["--num-cpus", "1", "--include-dashboard", "false", "--disable-usage-stats", "--block"]
    log = (tmp_path / "head.log").open("wb")
    leader = subprocess.Popen(
        [*RAY_CLI, "start", *args],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    address = ""
    try:
        address = head_address(temp, leader)
        yield address, auth
    finally:
        _stop(leader, address)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _ollm(home: Path, auth: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env.update(
        {
            "OLLM_HOME": str(home),
            "OLLM_PROVIDER": "simulated",
            "PYTHONPATH": str(REPO),
            "NO_COLOR": "1",
            **auth,
        }
    )
    return subprocess.run(
        [*OLLM, *args], cwd=home, env=env, capture_output=True, text=True, timeout=180
    )


def _hosts(address: str, namespace: str, auth: dict[str, str]) -> list[str]:
    """The named actors of ``namespace`` on the cluster, asked by a driver of its own."""
    code = (
        "import sys, ray\n"
        "ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False)\n"
        "for a in ray.util.list_named_actors(all_namespaces=True):\n"
        "    if a['namespace'] == sys.argv[2]: print(a['name'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), **auth}
    done = subprocess.run(
        [sys.executable, "-c", code, address, namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.ray
def test_run_with_ray_address_keeps_the_conversation_on_the_cluster(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, auth = cluster
    home = tmp_path / "home"
    home.mkdir()
    first = _ollm(home, auth, "run", "-p", "first question", "--ray-address", address)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip()
    session = re.search(r"session ([0-9a-f]{8})", first.stderr)
    assert session is not None, first.stderr
    paths = ServicePaths.for_home(home)
    # the pipeline host lives on the cluster, in this home's namespace, after the command
    hosts = _hosts(address, paths.namespace, auth)
    assert [h for h in hosts if h.startswith("pipeline-")], hosts
    # and no local service was started for it
    assert read_state(paths) is None

    again = _ollm(home, auth, "run", "--continue", "-p", "second", "--ray-address", address)
    assert again.returncode == 0, again.stderr
    assert f"session {session.group(1)}" in again.stderr


_TOKEN_REFUSED = "refused this client: its token is missing or is not the cluster's"


@pytest.mark.ray
@pytest.mark.parametrize(
    ("runtime", "token"), [("service", "wrong"), ("service", "missing"), ("ray", "wrong")]
)
def test_a_cluster_client_without_its_token_is_refused(
    cluster: tuple[str, dict[str, str]], tmp_path: Path, runtime: str, token: str
) -> None:
    address, _ = cluster
    auth: dict[str, str] = {}
    if token == "wrong":
        wrong = tmp_path / "wrong-token"
        wrong.write_text(secrets.token_hex(32))
        wrong.chmod(0o600)
        auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(wrong)}
    home = tmp_path / "home"
    home.mkdir()
    done = _ollm(home, auth, "run", "-p", "hello", "--runtime", runtime, "--ray-address", address)
    assert done.returncode == 8, done.stderr
    # said by the probe of the GCS, before a ray.init that would retry for ~20 s
    assert f"the Ray cluster at {address} {_TOKEN_REFUSED}" in done.stderr
    assert "RAY_AUTH_TOKEN_PATH" in done.stderr  # what to do
    assert read_state(ServicePaths.for_home(home, cluster=address)) is None  # no daemon left


@pytest.mark.parametrize("runtime", ["service", "ray"])
def test_a_cluster_address_where_nothing_listens_is_said_at_once(
    tmp_path: Path, refused_port: int, runtime: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    address = f"127.0.0.1:{refused_port}"
    done = _ollm(home, {}, "run", "-p", "hello", "--runtime", runtime, "--ray-address", address)
    assert done.returncode == 8, done.stderr
    assert f"nothing answers at the Ray cluster address {address}" in done.stderr
    assert "--ray-address HOST:PORT" in done.stderr


@pytest.mark.ray
def test_the_service_refused_by_a_cluster_exits_with_its_code_and_logs_why(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """The daemon asks too (a cluster may change its token between the client's
    question and the daemon's start): it exits CLUSTER_REFUSED at once."""
    address, _ = cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env.update({"OLLM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)})
    daemon = [sys.executable, "-m", "ollm_cli.pipeline.service._daemon", "serve"]
    done = subprocess.run(
        [*daemon, "--idle-timeout", "5", "--stop-timeout", "5", "--ray-address", address],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == CLUSTER_REFUSED, done.stderr
    assert f"could not attach to the Ray cluster at {address}" in done.stderr
    assert _TOKEN_REFUSED in done.stderr
