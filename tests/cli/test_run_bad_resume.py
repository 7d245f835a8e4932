"""``ollm run --resume ID`` with an id that cannot be one is refused before the local
service starts (before, the service started first: ~8 s for an error the command can
see in its argument), with exit 4 and what to type instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ollm_cli.pipeline.service._state import ServicePaths
from tests.cli.conftest import OLLM_SCRIPT


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        ("zzzz", "'zzzz' is not a session id"),
        ("ab", "session id prefix 'ab' is too short"),
        ("../../etc", "'../../etc' is not a session id"),
    ],
)
def test_an_id_that_cannot_be_one_is_refused_before_the_service_starts(
    argument: str, says: str, ollm_home: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "OLLM_RUNTIME__KIND": "service", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, "run", "--resume", argument, "-p", "hi"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4, done.stderr
    assert f"error: {says}" in done.stderr
    assert "hint:" in done.stderr
    assert "starting the OLLM service" not in done.stderr
    assert not ServicePaths.for_home(ollm_home).folder.exists()  # no service was started
