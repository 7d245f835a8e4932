"""An invalid config does not lock the user out of the commands that help repair it.

``config show``, ``config path``, ``service stop`` and ``sessions doctor`` run with
each invalid value left at its default and print the error beside what they print;
every other command still refuses with exit code 3.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.loader import load_settings
from ollm_cli.pipeline.errors import ConfigError
from tests.cli.conftest import OLLM_SCRIPT, REPO
from tests.cli.test_app import run_main

BAD_THRESHOLD = "services:\n  session:\n    maxSessions: 5\n  compression:\n    threshold: 7\n"


def _write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(text)
    return path


def test_lenient_loading_keeps_the_valid_values_and_names_the_bad_one(ollm_home: Path) -> None:
    path = _write_config(ollm_home, BAD_THRESHOLD)
    with pytest.raises(ConfigError):
        load_settings(user_file=path)
    loaded = load_settings(user_file=path, lenient=True)
    assert loaded.settings.services.session.max_sessions == 5
    assert loaded.settings.services.compression.threshold == 0.8
    assert "services.compression.threshold" in loaded.problems[0].message
    assert "is invalid" in loaded.source_of("services.compression.threshold")
    assert loaded.source_of("services.session.maxSessions") == str(path)


def test_config_show_prints_the_defaults_and_the_error_then_exits_3(
    ollm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_config(ollm_home, BAD_THRESHOLD)
    assert run_main(monkeypatch, "config", "show", "--json") == 3
    out, err = capsys.readouterr()
    rows = {row["key"]: row for row in orjson.loads(out)}
    assert rows["services.compression.threshold"]["value"] == 0.8
    assert "invalid" in rows["services.compression.threshold"]["source"]
    assert rows["services.session.maxSessions"]["value"] == 5
    assert "services.compression.threshold" in orjson.loads(err.splitlines()[0])["error"]


def test_config_show_and_path_survive_a_file_that_is_not_yaml(
    ollm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write_config(ollm_home, "services: [\n")
    assert run_main(monkeypatch, "config", "show") == 3
    out, err = capsys.readouterr()
    assert "services.compression.threshold" in out and "not valid YAML" in err
    assert run_main(monkeypatch, "config", "path") == 3
    out, err = capsys.readouterr()
    assert str(path) in out.replace("\n", "") and "exists" in out
    assert "not valid YAML" in err


def test_other_commands_still_refuse_an_invalid_config(
    ollm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_config(ollm_home, BAD_THRESHOLD)
    assert run_main(monkeypatch, "sessions", "list") == 3
    assert "services.compression.threshold" in capsys.readouterr().err


def test_sessions_doctor_runs_and_warns(
    ollm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_config(ollm_home, BAD_THRESHOLD)
    assert run_main(monkeypatch, "sessions", "doctor") == 0
    out, err = capsys.readouterr()
    assert "All is well" in out
    assert "warning:" in err and "services.compression.threshold" in err


def test_service_stop_runs_with_an_invalid_config(ollm_home: Path) -> None:
    _write_config(ollm_home, "runtime:\n  service:\n    stopTimeout: soon\n")
    done = subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, "service", "stop"],
        cwd=REPO,
        env={**os.environ, "OLLM_HOME": str(ollm_home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "was not running" in done.stderr
    assert "warning:" in done.stderr and "runtime.service.stopTimeout" in done.stderr
