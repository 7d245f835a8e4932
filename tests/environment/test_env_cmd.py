"""``ollm env check``: names and reasons, never values."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ollm_cli.cli.env_cmd import app

GH = "ghp_" + "Zq7Lm2Xp9Rt4Vb8Nc1Kd6Hf3Jg5Ws0Ye2Ua4"
DB_PASSWORD = "correct-horse-battery-staple"
SECRETS = {
    "GITHUB_TOKEN": GH,
    "DB_PASSWORD": DB_PASSWORD,
    "NOTES_FOR_TOOLS": f"use {GH} for pushes",
    "GIT_SSH_COMMAND": "ssh -i /home/alice/.ssh/deploy_key",
    "EDITOR": "vim-editor-of-choice",
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_check_lists_every_variable_with_its_reason(runner: CliRunner) -> None:
    result = runner.invoke(app, ["check"], env={**SECRETS, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    for name in SECRETS:
        assert name in out
    assert "name matches deny pattern *_TOKEN" in out
    assert "value looks like a credential (github)" in out
    assert "changes what git or the shell executes" in out
    assert "matches no deny pattern" in out
    assert "removed (values are never shown)" in out
    for value in SECRETS.values():
        assert value not in out
    assert "deploy_key" not in out


def test_only_removed_hides_what_passes(runner: CliRunner) -> None:
    result = runner.invoke(app, ["check", "--only-removed"], env={**SECRETS, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "GITHUB_TOKEN" in result.output
    assert "EDITOR" not in result.output


def test_json_output_for_scripts(runner: CliRunner) -> None:
    result = runner.invoke(app, ["check", "--json", "--only-removed"], env=SECRETS)
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert data["mode"] == "default"
    names = {v["name"]: v for v in data["variables"]}
    assert {"GITHUB_TOKEN", "DB_PASSWORD", "NOTES_FOR_TOOLS", "GIT_SSH_COMMAND"} <= set(names)
    assert all(not v["kept"] and v["reason"] for v in data["variables"])
    assert "EDITOR" not in names
    assert data["removed"] == len(data["variables"])
    assert data["kept"] >= 1
    for value in SECRETS.values():
        assert value not in result.output


def test_check_follows_the_configured_mode(runner: CliRunner, ollm_home: Path) -> None:
    ollm_home.mkdir(parents=True)
    (ollm_home / "config.yaml").write_text(
        "services:\n  environment:\n    mode: allowOnly\n    allowList: [PATH, EDITOR]\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", "--json"], env={"EDITOR": "vim", "PAGER": "less"})
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert data["mode"] == "allowOnly"
    reasons = {v["name"]: (v["kept"], v["reason"]) for v in data["variables"]}
    assert reasons["EDITOR"] == (True, "on the allow list (EDITOR)")
    assert reasons["PAGER"] == (False, "not on the allow list (allowOnly mode)")


def test_no_table_when_nothing_is_removed(runner: CliRunner, ollm_home: Path) -> None:
    ollm_home.mkdir(parents=True)
    (ollm_home / "config.yaml").write_text(
        "services:\n  environment:\n    denyPatterns: [NOTHING_MATCHES_THIS]\n", encoding="utf-8"
    )
    result = runner.invoke(app, ["check", "--only-removed"], env={"EDITOR": "vim"})
    assert result.exit_code == 0, result.output
    assert "EDITOR" not in result.output
    assert "kept," in result.output


def test_help_explains_the_command(runner: CliRunner) -> None:
    result = runner.invoke(app, ["check", "--help"])
    assert result.exit_code == 0
    assert "--only-removed" in result.output
    assert "never printed" in result.output
