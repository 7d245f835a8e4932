"""``ollm config show`` never cuts a value and masks secrets, not the names of variables."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ollm_cli.cli.config_cmd import redacted_value
from tests.cli.test_app import run_main

LONG_URL = "http://127.0.0.1:8080/" + "/".join(f"segment{n}" for n in range(14)) + "/v1"


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text)


def _column(text: str, index: int) -> str:
    """The cells of one table column, top to bottom, joined (a folded value whole again);
    without a table (a narrow terminal), every line stripped and joined."""
    rows = [line.split("│") for line in text.splitlines() if "│" in line]
    if not rows:
        return "".join(line.strip() for line in text.splitlines())
    return "".join(cells[index].strip() for cells in rows)


@pytest.mark.parametrize("columns", ["80", "120", "50"])
def test_a_long_value_is_shown_whole_at_any_width(
    columns: str,
    ollm_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _config(ollm_home, f"provider:\n  openai:\n    baseUrl: {LONG_URL}\n")
    monkeypatch.setenv("COLUMNS", columns)
    assert run_main(monkeypatch, "config", "show") == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert LONG_URL in _column(out, 2)
    assert "provider.openai.baseUrl" in _column(out, 1)
    assert all(len(line) <= int(columns) for line in out.splitlines())


def test_the_name_of_a_variable_is_shown_and_secrets_stay_masked(
    ollm_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(
        ollm_home,
        "provider:\n  openai:\n    apiKeyEnv: MY_LLM_KEY\n"
        "hooks:\n  - {event: session:start, command: 'curl -H \"Authorization: Bearer "
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789\" x'}\n",
    )
    assert run_main(monkeypatch, "config", "show", "--json") == 0
    rows = {row["key"]: row["value"] for row in orjson.loads(capsys.readouterr().out)}
    assert rows["provider.openai.apiKeyEnv"] == "MY_LLM_KEY"
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in orjson.dumps(rows).decode()


def test_a_secret_in_a_variable_name_key_is_still_masked() -> None:
    assert redacted_value("provider.openai.apiKeyEnv", "OPENAI_API_KEY") == "OPENAI_API_KEY"
    assert redacted_value("provider.openai.apiKeyEnv", "sk-proj abc") == "[REDACTED]"
    assert redacted_value("provider.openai.apiKey", "hunter2") == "[REDACTED]"
