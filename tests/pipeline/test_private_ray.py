"""``ollm run --runtime ray`` starts a Ray of its own whose files are private to the
user (issue 27: Ray's ``/tmp/ray`` is open to every user)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

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
    finally:
        shutil.rmtree(home, ignore_errors=True)
