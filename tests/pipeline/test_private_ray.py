"""``ollm run --runtime ray`` starts a Ray of its own whose files are private to the
user (issue 27: Ray's ``/tmp/ray`` is open to every user), whose servers listen on
127.0.0.1 only and answer only with this home's token (Ray's default binds every
interface, without a token)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pexpect
import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.runtime import RayRuntime
from tests.ray_node import gcs_answer

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


def test_the_ray_of_one_command_keeps_its_files_in_the_home_and_refuses_strangers(
    tmp_path: Path,
) -> None:
    """One ``ollm run --runtime ray`` (the chat, so that its Ray lives while a
    client tries it): Ray's files are in the home, private; its servers say they are
    on 127.0.0.1; and its GCS answers a client with this home's token only."""
    home = Path(tempfile.mkdtemp(prefix="oh-", dir="/tmp"))  # short: Ray's files go in it
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env = {
        **clean,
        "OLLM_HOME": str(home),
        "OLLM_PROVIDER": "simulated",
        "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
        "NO_COLOR": "1",
    }
    chat = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run", "--runtime", "ray"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=300,
        dimensions=(30, 200),
    )
    try:
        chat.expect("› ")
        chat.sendline("hello")
        chat.expect(r"tokens \(\d+%\)")  # answered, on the Ray of this command
        screen = chat.before
        chat.expect("› ")
        ray_dir = home / "ray"
        sessions = [p for p in ray_dir.iterdir() if p.name.startswith("session_2")]
        assert sessions, "Ray's session folder is not in OLLM_HOME/ray"
        (port_file,) = sessions[0].glob("gcs_server_port_*")
        address = f"127.0.0.1:{port_file.read_text().strip()}"
        token = ray_dir / "token"
        # before: it answered a client without a token
        assert gcs_answer(address, {**clean, "RAY_AUTH_MODE": "disabled"}) == (
            "AuthenticationError"
        )
        with_token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
        assert gcs_answer(address, {**clean, **with_token}) == "answered"
        chat.sendline("/exit")
        chat.expect(pexpect.EOF)
        screen += chat.before
        chat.close()
        assert chat.exitstatus == 0, screen
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
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text()) == 64
        assert "SIGTERM handler" not in screen  # only our words on the terminal
    finally:
        chat.close(force=True)
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
