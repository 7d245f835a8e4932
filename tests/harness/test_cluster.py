"""A real two-node Ray cluster on this machine (``ray start --head`` plus a worker
node, ports of Ray's choosing and a private temp folder) running a batch through ``--ray-address``.

The head offers 1 CPU and the worker 2; the config asks for two tool workers
and a compression actor of 1 CPU each, so the pipeline can only start if the
worker node takes at least two of them: the batch finishing proves the
cluster and the placement settings are used. Teardown stops exactly the
processes of this cluster (never ``ray stop``, which would stop every Ray of
the machine, the test session's own included).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from tests.harness.conftest import REPO, expected_answer, ollm
from tests.ray_node import HEAD_PORTS, NODE_PORTS, RAY_CLI, head_address

CONFIG = """\
provider:
  name: simulated
  simulated: {latencyMs: 0, outputTokens: 12}
services:
  context: {loadProjectFiles: false}
runtime:
  kind: ray
  toolWorkers: 2
  toolWorkerCpus: 1
  compressionActors: 1
  compressionCpus: 1
"""

# A private cluster on 127.0.0.1: no token (Ray 2.60 enables token auth when
# ~/.ray/auth_token exists, and the driver would need the same token).
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}

SCRIPT = """\
name: on-cluster
conversations:
  - name: "node-{copy}"
    copies: 6
    messages: ["first {copy}", "second {copy}"]
"""


def _stop(leaders: list[subprocess.Popen[bytes]]) -> None:
    """Stop every process of the sessions our `ray start` commands lead, and only those."""
    sessions = {p.pid for p in leaders}
    for process in leaders:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 3  # then whatever is left is killed
    while time.monotonic() < deadline and any(p.poll() is None for p in leaders):
        time.sleep(0.2)
    for pid in psutil.pids():
        try:
            if os.getsid(pid) in sessions:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    for process in leaders:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A head and a worker node on 127.0.0.1; yields the head's address."""
    temp = tempfile.mkdtemp(prefix="ollm-ray-", dir="/tmp")  # short: Ray's sockets live there
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", **NO_AUTH}
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--block"]
    leaders: list[subprocess.Popen[bytes]] = []
    logs = tmp_path / "ray-logs"
    logs.mkdir()
    try:
        head_args = ["--head", *HEAD_PORTS, "--temp-dir", temp, "--num-cpus", "1"]
        head_args += ["--include-dashboard", "false", *common]
        leaders.append(
            subprocess.Popen(
                [*RAY_CLI, "start", *head_args],
                cwd=REPO,
                env=env,
                start_new_session=True,
                stdout=(logs / "head.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        address = head_address(temp, leaders[0])
        worker_args = ["--address", address, "--num-cpus", "2", *NODE_PORTS, *common]
        leaders.append(
            subprocess.Popen(
                [*RAY_CLI, "start", *worker_args],
                cwd=REPO,
                env=env,
                start_new_session=True,
                stdout=(logs / "worker.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
        yield address
    finally:
        _stop(leaders)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.ray
def test_batch_runs_through_a_two_node_cluster(
    cluster: str, tmp_path: Path, ollm_home: Path
) -> None:
    ollm_home.mkdir(parents=True, exist_ok=True)
    (ollm_home / "config.yaml").write_text(CONFIG)
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "cluster.yaml").write_text(SCRIPT)

    result = ollm(
        "batch", "cluster.yaml", "--ray-address", cluster, "-c", "3", "--json",
        cwd=folder, env=NO_AUTH, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = orjson.loads(result.stdout)
    assert report["done"] == 6 and report["failed"] == 0 and report["turns"] == 12

    settings = OllmSettings()
    settings.provider.simulated.output_tokens = 12
    store = ChatRecordingService(settings.services.session)
    try:
        summaries = store.list_sessions(tag="on-cluster")
        assert len(summaries) == 6
        for summary in summaries:
            copy = (summary.title or "").removeprefix("node-")
            session = store.get_session(summary.session_id)
            assert [(m.role, m.text) for m in session.messages] == [
                ("user", f"first {copy}"),
                ("assistant", expected_answer(settings, f"first {copy}")),
                ("user", f"second {copy}"),
                ("assistant", expected_answer(settings, f"second {copy}")),
            ]
    finally:
        store.close()
    assert {r["sessionId"] for r in report["results"]} == {s.session_id for s in summaries}
