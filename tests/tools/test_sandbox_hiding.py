"""The sandbox hides credentials and OLLM's own files, and bounds /tmp, file sizes and memory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.tools._hidden_paths import hidden_paths
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools.isolation._cgroups import MemoryCgroup

pytestmark = pytest.mark.skipif(
    not Sandbox(SandboxSettings(), Path.cwd()).available, reason="bubblewrap cannot run here"
)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp, which the sandbox replaces by its own tmpfs."""
    folder = Path(tempfile.mkdtemp(prefix="ollm-sandbox-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fake_home(outside_tmp: Path) -> Path:
    home = outside_tmp / "home"
    for relative, content in {
        ".ssh/id_ed25519": "PRIVATE-SSH-KEY",
        ".aws/credentials": "AWS-CREDENTIALS",
        ".config/gcloud/token": "GCLOUD-TOKEN",
        ".kube/config": "KUBE-CONFIG",
        ".docker/config.json": "DOCKER-AUTH",
        ".netrc": "NETRC-PASSWORD",
        ".git-credentials": "GIT-CREDENTIALS",
        ".pypirc": "PYPI-PASSWORD",
        ".npmrc": "NPM-TOKEN",
        "notes.txt": "ORDINARY-FILE",
    }.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return home


def _read_all(sandbox: Sandbox, paths: list[Path], env: dict[str, str]) -> str:
    script = "; ".join(f"cat {p} 2>/dev/null" for p in paths) + "; ls -A ~/.ssh; true"
    return sandbox.run(["bash", "-c", script], env=env).stdout


def test_credential_stores_and_the_ollm_home_are_hidden(
    workspace: Path,
    fake_home: Path,
    outside_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    plain_env: dict[str, str],
) -> None:
    ollm_home = outside_tmp / "ollm-home"
    monkeypatch.setenv("OLLM_HOME", str(ollm_home))
    (ollm_home / "sessions").mkdir(parents=True)
    (ollm_home / "sessions" / "other.json").write_text("OTHER-SESSION")
    env = {**plain_env, "HOME": str(fake_home)}
    sandbox = Sandbox(SandboxSettings(), workspace)
    targets = [p for p in fake_home.rglob("*") if p.is_file()]
    out = _read_all(sandbox, [*targets, ollm_home / "sessions" / "other.json"], env)
    for secret in (
        "PRIVATE-SSH-KEY",
        "AWS-CREDENTIALS",
        "GCLOUD-TOKEN",
        "KUBE-CONFIG",
        "DOCKER-AUTH",
        "NETRC-PASSWORD",
        "GIT-CREDENTIALS",
        "PYPI-PASSWORD",
        "NPM-TOKEN",
        "OTHER-SESSION",
    ):
        assert secret not in out
    assert "ORDINARY-FILE" in out  # the rest of the home stays readable


def test_root_only_files_are_hidden(workspace: Path, plain_env: dict[str, str]) -> None:
    shadow = Path("/etc/shadow")
    if not shadow.exists() or shadow.stat().st_mode & 0o004:
        pytest.skip("no root-only /etc/shadow here")
    result = Sandbox(SandboxSettings(), workspace).run(
        ["bash", "-c", "wc -c < /etc/shadow"], env=plain_env
    )
    assert result.stdout.strip() in ("", "0")


def test_deny_read_and_allow_read_adjust_the_list(
    workspace: Path,
    fake_home: Path,
    outside_tmp: Path,
    tmp_path: Path,
    plain_env: dict[str, str],
) -> None:
    extra = outside_tmp / "company-secrets"
    extra.mkdir()
    (extra / "file").write_text("COMPANY")
    settings = SandboxSettings(deny_read=[str(extra)], allow_read=[str(fake_home / ".npmrc")])
    env = {**plain_env, "HOME": str(fake_home)}
    out = _read_all(Sandbox(settings, workspace), [extra / "file", fake_home / ".npmrc"], env)
    assert "COMPANY" not in out and "NPM-TOKEN" in out
    listed = {p for p, _ in hidden_paths(settings, [fake_home], tmp_path / "nohome")}
    assert extra.resolve() in listed and (fake_home / ".npmrc").resolve() not in listed


def test_a_workspace_inside_a_hidden_folder_still_shows(
    fake_home: Path, plain_env: dict[str, str]
) -> None:
    project = fake_home / ".ssh" / "project"  # odd, but must not hide the workspace
    project.mkdir()
    (project / "main.py").write_text("print('hi')\n")
    result = Sandbox(SandboxSettings(), project).run(
        ["bash", "-c", "cat main.py; ls ../"], env={**plain_env, "HOME": str(fake_home)}
    )
    assert "print('hi')" in result.stdout and "id_ed25519" not in result.stdout


def test_the_control_folders_are_read_only(workspace: Path, plain_env: dict[str, str]) -> None:
    (workspace / ".ollm").mkdir()
    (workspace / ".git").mkdir()
    script = (
        "echo 'hooks: [{event: session:start, command: id}]' > .ollm/config.yaml; "
        "mkdir -p .git/hooks && echo x > .git/hooks/post-checkout; echo ok > plain.txt"
    )
    Sandbox(SandboxSettings(), workspace).run(["bash", "-c", script], env=plain_env)
    assert not (workspace / ".ollm" / "config.yaml").exists()
    assert not (workspace / ".git" / "hooks").exists()
    assert (workspace / "plain.txt").read_text() == "ok\n"


def test_tmp_has_a_size(workspace: Path, plain_env: dict[str, str]) -> None:
    sandbox = Sandbox(SandboxSettings(tmp_mb=4, max_file_mb=64), workspace)
    result = sandbox.run(
        [
            "bash",
            "-c",
            "dd if=/dev/zero of=/tmp/fill bs=1M count=16 2>/dev/null; stat -c %s /tmp/fill",
        ],
        env=plain_env,
    )
    assert int(result.stdout.split()[-1]) <= 4 * 1024 * 1024


def test_files_a_tool_writes_are_capped(workspace: Path, plain_env: dict[str, str]) -> None:
    sandbox = Sandbox(SandboxSettings(max_file_mb=2), workspace)
    result = sandbox.run(
        ["bash", "-c", "exec dd if=/dev/zero of=big bs=1M count=16"], env=plain_env
    )
    assert (workspace / "big").stat().st_size <= 2 * 1024 * 1024
    assert result.killed_by == "max_file_size"


def test_the_result_says_which_memory_limit_applied(
    workspace: Path, plain_env: dict[str, str]
) -> None:
    """Filling /tmp (RAM) past memoryMb: a memory cgroup stops it; RLIMIT_AS alone cannot."""
    sandbox = Sandbox(SandboxSettings(memory_mb=64, tmp_mb=512, max_file_mb=512), workspace)
    result = sandbox.run(
        ["bash", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=256 2>/dev/null; echo done"],
        env=plain_env,
    )
    if MemoryCgroup.parent() is not None:
        assert result.memory_limit == "cgroup"
        assert result.killed_by == "memory" and "done" not in result.stdout
    else:
        assert result.memory_limit == "rlimit"
    assert os.path.exists(workspace)
