"""``ollm run --runtime ray`` starts a Ray of its own whose files are private to the
user (issue 27: Ray's ``/tmp/ray`` is open to every user), whose servers listen on
127.0.0.1 only and answer only with this home's token (Ray's default binds every
interface, without a token)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.runtime import RayRuntime

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


def test_a_ray_of_one_command_keeps_its_files_in_the_home(tmp_path: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="oh-", dir="/tmp"))  # short: Ray's files go in it
    try:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))},
            "OLLM_HOME": str(home),
            "OLLM_PROVIDER": "simulated",
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "NO_COLOR": "1",
        }
        done = subprocess.run(
            [*OLLM, "run", "--runtime", "ray", "-p", "hello"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        ray_dir = home / "ray"
        sessions = [p for p in ray_dir.iterdir() if p.name.startswith("session_2")]
        assert sessions, "Ray's session folder is not in OLLM_HOME/ray"
        assert (sessions[0] / "logs").is_dir()
        info = home.stat()
        assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
        metrics = list(sessions[0].glob("metrics_export_port_*"))
        assert all(p.read_text().strip() == "-1" for p in metrics)  # collection is off
        # every server Ray started says it is on 127.0.0.1 (before: the machine's address)
        logs = "".join(
            p.read_text(errors="replace") for p in (sessions[0] / "logs").glob("*") if p.is_file()
        )
        addresses = set(re.findall(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", logs))
        assert addresses == {"127.0.0.1"}, addresses
        token = ray_dir / "token"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text()) == 64
        assert "SIGTERM handler" not in done.stderr  # only our words on the terminal
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_process_that_imported_ray_first_cannot_start_a_private_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ray  # noqa: F401  (Ray read its variables here, without ours)

    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    runtime = RayRuntime(OllmSettings(), tmp_path)
    with pytest.raises(RuntimeError, match="imported before"):
        runtime._private_local_ray()
    assert "RAY_AUTH_MODE" not in os.environ


# A Ray runtime of its own in a fresh process (as `ollm run --runtime ray` starts it):
# it prints "gcs ADDRESS", then waits for a line on stdin before it stops.
RUNTIME_SCRIPT = """
import asyncio, sys
from pathlib import Path
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.runtime import RayRuntime

async def main():
    runtime = RayRuntime(OllmSettings(), Path.cwd())
    await runtime.start()
    import ray
    print("gcs", ray.get_runtime_context().gcs_address, flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await runtime.shutdown()

asyncio.run(main())
"""

# A client of that Ray's GCS: it reads a key, or says why it cannot.
CLIENT_SCRIPT = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"key", None, timeout=10)
except Exception as error:
    print(type(error).__name__)
    sys.exit(3)
print("answered")
"""


def test_the_ray_of_one_command_refuses_a_client_without_its_token(tmp_path: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="oh-", dir="/tmp"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env = {**clean, "OLLM_HOME": str(home), "OLLM_PROVIDER": "simulated", "NO_COLOR": "1"}
    runtime = subprocess.Popen(
        [sys.executable, "-c", RUNTIME_SCRIPT],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert runtime.stdout is not None and runtime.stdin is not None
        said = [runtime.stdout.readline()]  # Ray may print a notice of its own first
        while said[-1] and not said[-1].startswith("gcs "):
            said.append(runtime.stdout.readline())
        address = said[-1].removeprefix("gcs ").strip()
        assert address.startswith("127.0.0.1:"), said
        token = str(home / "ray" / "token")
        for auth, expected in (
            ({"RAY_AUTH_MODE": "disabled"}, "AuthenticationError"),  # before: it answered
            ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token}, "answered"),
        ):
            client = subprocess.run(
                [sys.executable, "-c", CLIENT_SCRIPT, address],
                env={**clean, **auth},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert client.stdout.strip() == expected, client.stderr
        runtime.stdin.write("\n")
        runtime.stdin.flush()
        assert runtime.wait(timeout=120) == 0
    finally:
        runtime.kill()
        runtime.wait()
        shutil.rmtree(home, ignore_errors=True)
