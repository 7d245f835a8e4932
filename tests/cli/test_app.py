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
