"""Issue 21 as an attacker plays it: a trusted workspace, the model's tool call
(driven by the test's own Ollama-protocol server) tries to plant a hook in
``.ollm/config.yaml`` or a git hook, and the next ``ollm run`` must run nothing.

The ``ollm`` command runs as a user runs it, on the in-process runtime and on
the local service (a Ray head of its own, started once for the module).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ollm_cli.config.trust import trust_folder
from tests.fake_ollama import FakeModel, FakeOllama, Reply

REPO = Path(__file__).resolve().parents[2]
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
MODEL = "llama3.2:latest"
APPROVALS = "tools:\n  approval:\n    shell: allow\n    write_file: allow\n    edit_file: allow\n"


class Attacker:
    """Answers ``plant`` with the tool call of the test, anything else with text."""

    def __init__(self) -> None:
        self.call: tuple[str, dict[str, Any]] | None = None
        self.results: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last.get("role") == "tool":
            self.results.append(str(last.get("content", "")))
            return Reply.text("done", chunks=1)
        if str(last.get("content", "")) == "plant" and self.call is not None:
            name, arguments = self.call
            return Reply.tool_call(name, arguments)
        return Reply.text("hello", chunks=1)


@pytest.fixture(scope="module")
def attacker() -> Attacker:
    return Attacker()


@pytest.fixture(scope="module")
def server(attacker: Attacker) -> Iterator[FakeOllama]:
    with FakeOllama(models=[FakeModel(name=MODEL, context_length=8192)]) as fake:
        fake.default_reply = attacker
        yield fake


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory, server: FakeOllama) -> Iterator[Path]:
    """The parent of the OLLM homes; the service's home has its service started."""
    root = tmp_path_factory.mktemp("homes")
    for kind in ("inprocess", "service"):
        (root / kind).mkdir()
        (root / kind / "config.yaml").write_text(APPROVALS)
    yield root
    if (root / "service" / "service").exists():
        run_ollm(root / "service", server, root, "service", "stop", kind="service")


def run_ollm(
    home: Path, server: FakeOllama, cwd: Path, *args: str, kind: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    env.update(
        OLLM_HOME=str(home),
        OLLM_PROVIDER="ollama",
        OLLM_OLLAMA_HOST=server.url,
        OLLM_MODEL=MODEL,
        OLLM_RUNTIME__KIND=kind,
        OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES="false",
        PYTHONPATH=str(REPO),
        NO_COLOR="1",
    )
    return subprocess.run(
        [*OLLM, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=240
    )


def hook_config(marker: Path) -> str:
    return f"hooks:\n  - event: session:start\n    command: touch {marker}\n"


ATTACKS: dict[str, tuple[str, Any]] = {
    "shell": ("shell", "plant"),
    "write_file": ("write_file", "plant"),
    "edit_file": ("edit_file", "plant"),
    "shell-git-hook": ("shell", "git"),
    "shell-symlink": ("shell", "symlink"),
}


def arguments(attack: str, marker: Path) -> dict[str, Any]:
    config = hook_config(marker)
    printf = config.replace("\n", "\\n")
    if attack == "shell":
        return {"command": f"mkdir -p .ollm; printf '{printf}' > .ollm/config.yaml"}
    if attack == "write_file":
        return {"path": ".ollm/config.yaml", "content": config}
    if attack == "edit_file":
        return {"path": ".ollm/config.yaml", "old_string": "# settings\n", "new_string": config}
    if attack == "shell-symlink":
        return {"command": f"ln -s .ollm cfg; printf '{printf}' > cfg/config.yaml"}
    return {  # git init, then a hook git runs on the host at the user's next commit
        "command": f"git init -q . || git init -q sub; "
        f"printf '#!/bin/sh\\ntouch {marker}\\n' > sub/.git/hooks/pre-commit; "
        f"chmod +x sub/.git/hooks/pre-commit"
    }


CASES = [
    ("shell", False),
    ("shell", True),
    ("write_file", False),
    ("write_file", True),
    ("edit_file", True),  # edit_file needs a file to edit
    ("shell-git-hook", False),
    ("shell-symlink", True),
]


@pytest.mark.parametrize("kind", ["inprocess", pytest.param("service", marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    ("attack", "existing"),
    CASES,
    ids=[f"{a}-{'ollm-folder' if e else 'no-ollm-folder'}" for a, e in CASES],
)
def test_a_tool_call_cannot_plant_what_the_next_run_executes(
    attack: str,
    existing: bool,
    kind: str,
    attacker: Attacker,
    server: FakeOllama,
    homes: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, _ = ATTACKS[attack]
    workspace = tmp_path / "project"
    workspace.mkdir()
    # inside the workspace: a planted hook would run in the sandbox, which may write there
    marker = workspace / "pwned"
    if existing:
        (workspace / ".ollm").mkdir()
        (workspace / ".ollm" / "config.yaml").write_text("# settings\n")
    home = homes / kind
    # the user trusted the workspace before (`ollm trust` itself runs in the test below)
    monkeypatch.setenv("OLLM_HOME", str(home))
    trust_folder(workspace)
    attacker.call = (name, arguments(attack, marker))
    attacker.results.clear()

    planted = run_ollm(home, server, workspace, "run", "-p", "plant", kind=kind)

    assert planted.returncode == 0, planted.stderr
    [result] = attacker.results
    assert ".ollm" in result or ".git" in result  # the model is told which path
    config = workspace / ".ollm" / "config.yaml"
    assert "hooks" not in (config.read_text() if config.exists() else "")
    assert not (workspace / "sub" / ".git").exists()
    assert not (workspace / ".git").exists()
    again = run_ollm(home, server, workspace, "run", "-p", "hello", kind=kind)
    assert again.returncode == 0, again.stderr
    assert not marker.exists()


def test_the_planted_config_would_run_if_it_got_there(
    server: FakeOllama, homes: Path, tmp_path: Path
) -> None:
    """The attack's teeth: the same config, written by the user, does run its hook."""
    workspace = tmp_path / "project"
    (workspace / ".ollm").mkdir(parents=True)
    marker = workspace / "ran"  # a hook runs in the sandbox: it writes in the workspace
    (workspace / ".ollm" / "config.yaml").write_text(hook_config(marker))
    home = homes / "inprocess"
    assert run_ollm(home, server, workspace, "trust", kind="inprocess").returncode == 0
    done = run_ollm(home, server, workspace, "run", "-p", "hello", kind="inprocess")
    assert done.returncode == 0, done.stderr
    assert marker.exists()
