"""``ollm files`` through typer's CliRunner, on real trees."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ollm_cli.cli.files_cmd import app
from ollm_cli.pipeline.errors import ToolError
from tests.discovery.trees import build

runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    build(
        root,
        {
            ".gitignore": "*.log\n",
            "README.md": "# project\n",
            "debug.log": "",
            "src/app.py": "print('hi')\n",
            "src/deep/er/x.py": "",
            "node_modules/m/index.js": "",
        },
    )
    monkeypatch.chdir(root)
    return root


def test_lists_what_the_model_sees(project: Path) -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        ".gitignore",
        "README.md",
        "src/app.py",
        "src/deep/er/x.py",
    ]


def test_depth_and_globs(project: Path) -> None:
    shallow = runner.invoke(app, [str(project), "--depth", "1"])
    assert shallow.stdout.splitlines() == [".gitignore", "README.md", "src/app.py"]
    only = runner.invoke(app, ["--include", "*.py", "--exclude", "deep/"])
    assert only.stdout.splitlines() == ["src/app.py"]
    assert runner.invoke(app, ["--depth", "-1"]).exit_code == 2


def test_json_with_stats(project: Path) -> None:
    result = runner.invoke(app, ["--json", "--stats"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["root"] == str(project.resolve())
    assert data["files"] == [".gitignore", "README.md", "src/app.py", "src/deep/er/x.py"]
    assert data["stats"]["files"] == 4
    assert data["stats"]["totalBytes"] == len("*.log\n# project\nprint('hi')\n")
    assert data["stats"]["directoriesIgnored"] == 1
    assert data["stats"]["filesIgnored"] == 1
    assert data["notes"] == [] and data["truncated"] is False
    plain = orjson.loads(runner.invoke(app, ["--json"]).stdout)
    assert "stats" not in plain


def test_stats_table_and_cap_note(project: Path) -> None:
    result = runner.invoke(app, ["--stats", "--max-files", "2"])
    assert result.exit_code == 0, result.output
    assert "totalBytes" in result.stdout and "truncated" in result.stdout
    assert "maxFiles" in result.stderr
    capped = orjson.loads(runner.invoke(app, ["--json", "--max-files", "2"]).stdout)
    assert capped["truncated"] and capped["notes"][0]["kind"] == "cap_reached"


def test_follow_symlinks_flag(project: Path) -> None:
    (project / "link").symlink_to(project / "src")
    listed = runner.invoke(app, []).stdout.splitlines()
    assert "link" in listed
    followed = runner.invoke(app, ["--follow-symlinks"]).stdout.splitlines()
    assert "link/app.py" in followed


def test_refuses_the_filesystem_root_and_home(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = runner.invoke(app, ["/"])
    assert isinstance(refused.exception, ToolError)
    assert "--all-roots" in (refused.exception.hint or "")
    monkeypatch.setenv("HOME", str(project))
    home = runner.invoke(app, [])
    assert isinstance(home.exception, ToolError)
    allowed = runner.invoke(app, ["--all-roots"])
    assert allowed.exit_code == 0 and "README.md" in allowed.stdout


def test_empty_directory_prints_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, [str(tmp_path / "empty")])
    assert result.exit_code == 0 and result.stdout == ""


def test_works_when_mounted_as_a_subcommand(project: Path) -> None:
    """As cli/app.py mounts it: `ollm files PATH --json`, options after the path."""
    import typer

    ollm = typer.Typer()
    ollm.add_typer(app, name="files")

    @ollm.command()
    def other() -> None:  # pragma: no cover - makes `ollm` a group, as it is
        pass

    result = runner.invoke(ollm, ["files", str(project / "src"), "--json", "--depth", "0"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["files"] == ["app.py"]
    usage = runner.invoke(ollm, ["files", "--help"])
    assert "COMMAND" not in usage.stdout and "--all-roots" in usage.stdout
