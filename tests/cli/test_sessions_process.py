"""``ollm sessions`` as real processes: ``main``'s exit codes, JSON errors, a real terminal."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pexpect

from ollm_cli.pipeline.records import Session
from tests.cli.conftest import OLLM_SCRIPT, REPO, run_ollm
from tests.cli.session_strategies import make_session

Seed = Callable[..., list[str]]
SESSION_ID = "3f1c2a9e-7b4d-4e8a-9c1f-2d5e6a7b8c90"
COLOR_CODE = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|9[0-7]|38;[0-9;]+)m")


def _seeded(seed: Seed) -> None:
    seed(make_session(title="Colourful chat", session_id=SESSION_ID, tags=["demo"]))


def _spawn_in_terminal(*args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-c", OLLM_SCRIPT, "sessions", *args],
        cwd=str(REPO),
        env={**os.environ, "NO_COLOR": "1", "TERM": "dumb"},
        encoding="utf-8",
        timeout=60,
    )


def test_main_maps_session_errors_to_exit_code_4() -> None:
    unknown = run_ollm("view", "deadbeef")
    assert unknown.returncode == 4
    assert "error: no session id starts with 'deadbeef'" in unknown.stderr
    assert "hint:" in unknown.stderr
    invalid = run_ollm("delete", "../../etc/passwd", "--yes", "--json")
    assert invalid.returncode == 4
    payload = orjson.loads(invalid.stderr)
    assert payload["type"] == "InvalidSessionIdError"
    assert "is not a session id" in payload["error"]
    assert payload["hint"]


def test_delete_without_a_terminal_refuses_with_exit_code_2(seed: Seed) -> None:
    _seeded(seed)
    refused = run_ollm("delete", SESSION_ID, input="y\n")
    assert refused.returncode == 2
    assert "stdin is not a terminal" in refused.stderr
    assert "--yes" in refused.stderr
    refused_json = run_ollm("clear", "--all", "--json")
    assert refused_json.returncode == 2
    assert orjson.loads(refused_json.stderr)["hint"] == "pass --yes to go ahead"
    listed = run_ollm("list", "--json")
    assert [row["sessionId"] for row in orjson.loads(listed.stdout)] == [SESSION_ID]


def test_delete_asks_on_a_terminal_and_no_keeps_the_session(seed: Seed) -> None:
    _seeded(seed)
    child = _spawn_in_terminal("delete", "3f1c2a9e")
    child.expect(r"Delete session 3f1c2a9e 'Colourful chat' \(0 messages\)\? \[y/N\]")
    child.sendline("n")
    child.expect("Nothing deleted.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert run_ollm("view", SESSION_ID, "--json").returncode == 0


def test_delete_asks_on_a_terminal_and_yes_deletes(seed: Seed, sessions_dir: Path) -> None:
    _seeded(seed)
    child = _spawn_in_terminal("delete", "3f1c2a9e")
    child.expect(r"\[y/N\]")
    child.sendline("y")
    child.expect(f"Deleted session {SESSION_ID}.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert not (sessions_dir / f"{SESSION_ID}.json").exists()


def test_no_color_is_respected(seed: Seed) -> None:
    _seeded(seed)
    coloured = run_ollm("list", env={"FORCE_COLOR": "1", "COLUMNS": "120"})
    assert coloured.returncode == 0
    assert COLOR_CODE.search(coloured.stdout)
    plain = run_ollm("list", env={"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    assert plain.returncode == 0
    assert "Colourful chat" in plain.stdout
    assert not COLOR_CODE.search(plain.stdout)


def test_export_then_import_round_trips_through_real_processes(seed: Seed, tmp_path: Path) -> None:
    _seeded(seed)
    target = tmp_path / "out.json"
    assert (
        run_ollm("export", SESSION_ID, "--format", "json", "--output", str(target)).returncode == 0
    )
    imported = run_ollm("import", str(target), "--new-id", "--json")
    assert imported.returncode == 0, imported.stderr
    new_id = orjson.loads(imported.stdout)[0]["sessionId"]
    again = run_ollm("view", new_id, "--json")
    original = Session.from_json(target.read_bytes())
    copy = Session.model_validate(orjson.loads(again.stdout))
    assert copy.model_copy(update={"session_id": SESSION_ID}) == original
