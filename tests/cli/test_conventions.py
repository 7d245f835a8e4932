"""The ``ollm`` command's conventions: ``--version``, did-you-mean for a misspelt
command, flags shown without a value placeholder, examples one per line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version

import orjson
import pytest

from ollm_cli.cli.app import COMMANDS as APP_COMMANDS
from ollm_cli.cli.app import load_command
from ollm_cli.cli.help_pages import examples_one_per_line
from ollm_cli.cli.lazy import LazyGroup
from tests.cli.conftest import OLLM_SCRIPT, REPO
from tests.cli.test_app import run_main


def _every_command() -> list[list[str]]:
    paths: list[list[str]] = [[]]
    for name in APP_COMMANDS:
        paths.append([name])
        command = load_command(name)
        table = getattr(command, "table", None)
        subs = list(table) if table is not None else list(getattr(command, "commands", {}))
        paths.extend([name, sub] for sub in subs)
    return paths


EVERY_COMMAND = _every_command()


def test_version_flag_in_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", OLLM_SCRIPT, "--version"],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"ollm {version('ollm-cli')} (Python ")


@pytest.mark.parametrize("args", [["-V"], ["--version"], ["version"]])
def test_every_spelling_of_version_prints_it(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, *args) == 0
    assert capsys.readouterr().out.startswith(f"ollm {version('ollm-cli')} ")


def test_version_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "version", "--json") == 0
    info = orjson.loads(capsys.readouterr().out)
    assert info["version"] == version("ollm-cli") and info["python"].startswith("3.")


@pytest.mark.parametrize(
    ("typo", "meant"), [(["sesions"], "sessions"), (["sessions", "lst"], "list")]
)
def test_a_misspelt_command_suggests_the_right_one(
    typo: list[str],
    meant: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_main(monkeypatch, *typo) == 2
    err = capsys.readouterr().err
    assert f"No such command '{typo[-1]}'. Did you mean '{meant}'?" in err


def test_a_command_far_from_any_gets_no_suggestion(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "xyzzy") == 2
    err = capsys.readouterr().err
    assert "No such command 'xyzzy'" in err and "Did you mean" not in err


@pytest.mark.parametrize("path", EVERY_COMMAND, ids=lambda p: " ".join(p) or "ollm")
def test_help_shows_flags_without_a_placeholder_and_examples_one_per_line(
    path: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one help line per source line, to count them
    assert run_main(monkeypatch, *path, "--help") == 0
    out = capsys.readouterr().out
    assert "<bool>" not in out
    assert re.search(r"--help\s+-h\s+Show this message", out), out
    if path:
        for line in out.splitlines():
            assert line.count("ollm ") <= 1 or "&&" in line, line


def test_the_run_examples_are_a_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "run", "--help") == 0
    bullets = [line.strip() for line in capsys.readouterr().out.splitlines() if "•" in line]
    assert "• ollm run" in bullets[0] and len(bullets) >= 5
    assert not any("In the chat" in line for line in bullets)


def test_examples_keep_the_prose_around_them() -> None:
    text = "Do it.\n\n    Examples: `a --x`, `b` (after Ctrl-C).\n    Exit code 0 when done."
    assert examples_one_per_line(text) == (
        "Do it.\n\nExamples:\n\n- `a --x`\n- `b` (after Ctrl-C)\n\nExit code 0 when done."
    )
    assert examples_one_per_line("Plain text, no example.") == "Plain text, no example."
    # prose after the examples' sentence keeps its code as prose (`ollm trust --help`
    # listed "`ollm trust` again, which shows the difference" as an example)
    trust = "Trust it.\n\nExamples: `a`, `a --list`.\nRun `a` again. Kept in `$HOME/f`.\n"
    assert examples_one_per_line(trust) == (
        "Trust it.\n\nExamples:\n\n- `a`\n- `a --list`\n\nRun `a` again. Kept in `$HOME/f`."
    )


def test_lazy_groups_are_covered() -> None:
    assert isinstance(load_command("sessions"), LazyGroup)
