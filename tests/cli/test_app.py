"""The ``ollm`` entry point: help for every command, errors mapped to exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ollm_cli.cli.app import COMMANDS as APP_COMMANDS
from ollm_cli.cli.app import load_command, main

COMMANDS = [
    [],
    ["run"],
    ["sessions"],
    ["snapshots"],
    ["config"],
    ["env"],
    ["files"],
    ["extensions"],
    ["batch"],
    ["load"],
    ["soak"],
]


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr("sys.argv", ["ollm", *args])
    with pytest.raises(SystemExit) as done:
        main()
    return int(done.value.code or 0)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "ollm")
def test_every_command_has_help_with_an_example(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, *command, "--help") == 0
    text = capsys.readouterr().out
    assert "Usage" in text
    if command:
        assert "xample" in text or "ollm " in text


def test_an_ollm_error_becomes_its_exit_code_and_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "sessions", "view", "../../etc/passwd") == 4
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_json_errors_for_scripts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "sessions", "view", "deadbeef", "--json") == 4
    err = capsys.readouterr().err
    assert err.startswith("{") and '"hint"' in err


def test_a_bad_config_file_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ollm_home: object
) -> None:
    from pathlib import Path

    home = Path(str(ollm_home))
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("services:\n  session:\n    maxSessions: -1\n")
    assert run_main(monkeypatch, "config", "show") == 3
    assert "services.session.maxSessions" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(APP_COMMANDS))
def test_the_help_page_summary_of_each_command_is_its_own(name: str) -> None:
    """``ollm --help`` lists commands without importing them: the table must match them."""
    command = load_command(name)
    assert command is not None and command.help is not None
    first_paragraph = command.help.strip().split("\n\n")[0].replace("\n", " ")
    assert first_paragraph.startswith(APP_COMMANDS[name].summary.rstrip(".").split(":")[0])


def test_the_help_page_imports_no_command(tmp_path: Path) -> None:
    script = (
        "import sys; sys.argv = ['ollm', '--help']\n"
        "from ollm_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.startswith(('ray', 'ollm_cli.pipeline.coordinator',"
        " 'ollm_cli.cli.run_cmd', 'ollm_cli.pipeline.recording', 'ollama', 'xllamacpp'))]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "sessions" in done.stdout


def _spy_plugin(folder: Path, marker: Path) -> dict[str, str]:
    """A pydantic plugin installed as a distribution on PYTHONPATH that writes
    ``marker`` when pydantic hands it a validator."""
    dist = folder / "spy_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    (folder / "spy_plugin.py").write_text(
        "from pathlib import Path\n"
        "class _Spy:\n"
        "    def new_schema_validator(self, *args, **kwargs):\n"
        f"        Path({str(marker)!r}).write_text('seen')\n"
        "        return None, None, None\n"
        "plugin = _Spy()\n"
    )
    return {"PYTHONPATH": str(folder), "OLLM_HOME": str(folder / "home")}


@pytest.mark.parametrize("user_choice", [None, ""], ids=["default", "turned-back-on"])
def test_pydantic_plugins_see_nothing_unless_the_user_asks(
    tmp_path: Path, user_choice: str | None
) -> None:
    import os

    marker = tmp_path / "seen"
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env.update(_spy_plugin(tmp_path / "site", marker))
    if user_choice is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = user_choice
    script = "from ollm_cli.cli.app import main\nmain()\n"
    done = subprocess.run(
        [sys.executable, "-c", script, "sessions", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert marker.exists() == (user_choice is not None)
