"""The sandbox, for real: bubblewrap, real processes, a real socket on 127.0.0.1.

Every escape the issue lists is tried from inside and must fail; every limit
is hit by a real runaway command and must stop it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.errors import SandboxUnavailableError, ToolError
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._sandbox import (
    UNSANDBOXED_KEY,
    Sandbox,
    SandboxResult,
    harden_environment,
)
from ollm_cli.pipeline.tools._shell import ShellArgs, ShellTool
from ollm_cli.pipeline.tools._supervisor import Output, signal_cause
from ollm_cli.pipeline.tools.isolation._cgroups import PidsCgroup, cgroup_candidates, join_cgroup
from tests.ports import silent_port

REPO = Path(__file__).resolve().parents[2]


def bash(sandbox: Sandbox, script: str, env: dict[str, str]) -> SandboxResult:
    """Run a bash script in ``sandbox``."""
    return sandbox.run(["bash", "-c", script], env=env)


def processes_with(marker: str) -> list[psutil.Process]:
    """Host processes whose command line holds ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(marker in part for part in cmdline) and proc.pid != os.getpid():
            found.append(proc)
    return found


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP socket listening on 127.0.0.1 (its port)."""
    with silent_port() as port:
        yield port


# -- it runs, with what it was given ---------------------------------------------


def test_sandbox_runs_a_command_in_the_workspace(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    result = bash(sandbox, "pwd; echo out; echo err >&2; exit 3", plain_env)
    assert result.sandboxed
    assert result.exit_code == 3
    assert result.stdout == f"{workspace.resolve()}\nout\n"
    assert result.stderr == "err\n"
    assert result.killed_by is None and not result.timed_out
    assert result.duration_ms > 0


def test_sandbox_passes_stdin_and_cwd(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / "sub").mkdir()
    data = b"x" * 300_000  # more than a pipe buffer: written while output is read
    result = sandbox.run(
        ["bash", "-c", "pwd; wc -c"], env=plain_env, cwd=workspace / "sub", stdin=data
    )
    assert result.stdout.split() == [str((workspace / "sub").resolve()), "300000"]


def test_sandbox_stdin_closed_early_is_not_an_error(
    sandbox: Sandbox, plain_env: dict[str, str]
) -> None:
    result = sandbox.run(["true"], env=plain_env, stdin=b"y" * 1_000_000)
    assert result.exit_code == 0


def test_sandbox_environment_is_exactly_the_given_one_hardened(
    sandbox: Sandbox, plain_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARENT_ONLY_VARIABLE", "parent-value")
    env = {**plain_env, "GIT_ASKPASS": "/usr/bin/askpass", "SSH_ASKPASS": "x", "MINE": "1"}
    result = bash(sandbox, "env", env)
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert seen["MINE"] == "1"
    assert "PARENT_ONLY_VARIABLE" not in seen
    assert "GIT_ASKPASS" not in seen and "SSH_ASKPASS" not in seen
    assert seen["PAGER"] == "cat" and seen["GIT_PAGER"] == "cat"
    assert seen["GIT_TERMINAL_PROMPT"] == "0"
    assert seen["GIT_CONFIG_KEY_0"] == "credential.helper"


def test_sandbox_git_uses_no_credential_helper(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    helper = f"!f() {{ touch {workspace}/helper-ran; }}; f"
    subprocess.run(["git", "-C", str(workspace), "config", "credential.helper", helper], check=True)
    ask = "printf 'protocol=https\\nhost=example.com\\n\\n' | git credential fill"
    result = bash(sandbox, ask, plain_env)
    assert result.exit_code != 0
    assert "terminal prompts disabled" in result.stderr
    assert not (workspace / "helper-ran").exists()
    # The same command outside the sandbox's hardening does run the helper.
    subprocess.run(
        ["bash", "-c", ask],
        cwd=workspace,
        env={**plain_env, "GIT_TERMINAL_PROMPT": "0"},
        capture_output=True,
        check=False,
    )
    assert (workspace / "helper-ran").exists()


def test_sandbox_env_values_are_not_on_the_command_line(
    sandbox: Sandbox, plain_env: dict[str, str]
) -> None:
    marker = f"value-{uuid.uuid4().hex}"
    result = bash(
        sandbox,
        "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo $MINE",
        {**plain_env, "MINE": marker},
    )
    first, second = result.stdout.splitlines()[:2]
    assert marker not in first
    assert second == marker


# -- escapes that must fail --------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(REPO / "ollm-sandbox-escape", id="repository"),
        pytest.param(Path("/etc/ollm-sandbox-escape"), id="etc"),
        pytest.param(Path.home() / "ollm-sandbox-escape", id="home"),
    ],
)
def test_sandbox_writing_outside_the_workspace_fails(
    sandbox: Sandbox, plain_env: dict[str, str], target: Path
) -> None:
    result = bash(sandbox, f"echo escaped > {target}", plain_env)
    assert result.exit_code != 0
    # read-only, or not there at all when the folder lies under /tmp (the sandbox's
    # own /tmp is a private tmpfs): either way nothing reaches the host
    assert "Read-only file system" in result.stderr or "No such file or directory" in result.stderr
    assert not target.exists()


def test_sandbox_writing_inside_the_workspace_works(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    result = bash(sandbox, "echo written > made.txt", plain_env)
    assert result.exit_code == 0
    assert (workspace / "made.txt").read_text() == "written\n"


def test_sandbox_tmp_is_private(sandbox: Sandbox, plain_env: dict[str, str]) -> None:
    name = f"ollm-private-{uuid.uuid4().hex}"
    result = bash(sandbox, f"echo hidden > /tmp/{name} && cat /tmp/{name}", plain_env)
    assert result.stdout == "hidden\n"
    assert not (Path("/tmp") / name).exists()


def test_sandbox_cannot_remount_the_system_writable(
    sandbox: Sandbox, plain_env: dict[str, str]
) -> None:
    result = bash(sandbox, "mount -o remount,rw / && touch /etc/ollm-remounted", plain_env)
    assert result.exit_code != 0
    assert not Path("/etc/ollm-remounted").exists()


def test_sandbox_network_is_off_by_default(
    sandbox: Sandbox, plain_env: dict[str, str], listener: int
) -> None:
    result = bash(sandbox, f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected", plain_env)
    assert result.exit_code != 0
    assert "connected" not in result.stdout


def test_sandbox_network_on_when_configured(
    limits: SandboxSettings, workspace: Path, plain_env: dict[str, str], listener: int
) -> None:
    sandbox = Sandbox(limits.model_copy(update={"network": True}), workspace)
    result = bash(sandbox, f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected", plain_env)
    assert result.stdout == "connected\n"


@pytest.mark.parametrize(
    "launch",
    [
        pytest.param("sleep {marker} &", id="background"),
        pytest.param("setsid nohup sleep {marker} >/dev/null 2>&1 &", id="setsid-nohup"),
        pytest.param("(sleep {marker} &) &", id="double-fork"),
    ],
)
def test_sandbox_leaves_no_process_behind(
    sandbox: Sandbox, plain_env: dict[str, str], launch: str
) -> None:
    marker = f"1000.{uuid.uuid4().int % 10**9}"
    result = bash(sandbox, launch.format(marker=marker) + " echo started", plain_env)
    assert result.stdout.strip() == "started"
    assert processes_with(marker) == []


# -- limits --------------------------------------------------------------------------


def test_sandbox_stops_a_fork_bomb(workspace: Path, plain_env: dict[str, str]) -> None:
    settings = SandboxSettings(wall_time_s=8, max_processes=32, max_output_bytes=4096)
    sandbox = Sandbox(settings, workspace)
    marker = f"bomb{uuid.uuid4().hex[:12]}"
    result = bash(sandbox, f": {marker}; bomb() {{ bomb | bomb & }}; bomb; sleep 30", plain_env)
    assert result.killed_by in {"max_processes", "wall_time"}
    if Sandbox.pids_cgroup_parent() is not None:
        assert result.killed_by == "max_processes"
    assert processes_with(marker) == []
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks


def test_sandbox_cuts_infinite_output_with_a_note(
    sandbox: Sandbox, limits: SandboxSettings, plain_env: dict[str, str]
) -> None:
    result = sandbox.run(["yes"], env=plain_env)
    assert result.killed_by == "max_output"
    kept, note = result.stdout.rsplit("\n[", 1)
    assert len(kept.encode()) <= limits.max_output_bytes
    assert note.startswith("output truncated: at least ")
    assert result.truncated_bytes > 0


def test_sandbox_counts_the_cut_bytes_exactly(
    sandbox: Sandbox, limits: SandboxSettings, plain_env: dict[str, str]
) -> None:
    result = bash(sandbox, "head -c 10000 /dev/zero | tr '\\0' a", plain_env)
    dropped = 10000 - limits.max_output_bytes
    assert result.exit_code == 0 and result.killed_by is None
    assert result.truncated_bytes == dropped
    assert (
        result.stdout
        == "a" * limits.max_output_bytes + f"\n[output truncated: {dropped} more bytes]"
    )


def test_sandbox_stdout_and_stderr_share_the_output_budget(
    sandbox: Sandbox, limits: SandboxSettings, plain_env: dict[str, str]
) -> None:
    result = bash(
        sandbox,
        "head -c 3000 /dev/zero | tr '\\0' o; head -c 3000 /dev/zero | tr '\\0' e >&2",
        plain_env,
    )
    assert result.stdout == "o" * 3000
    assert result.stderr.startswith("e" * (limits.max_output_bytes - 3000))
    assert result.stderr.endswith(
        f"[output truncated: {6000 - limits.max_output_bytes} more bytes]"
    )


def test_sandbox_kills_a_command_past_the_wall_time(
    workspace: Path, plain_env: dict[str, str]
) -> None:
    sandbox = Sandbox(SandboxSettings(wall_time_s=1), workspace)
    marker = f"1200.{uuid.uuid4().int % 10**9}"
    result = bash(sandbox, f"echo before; sleep {marker}", plain_env)
    assert result.timed_out and result.killed_by == "wall_time"
    assert result.stdout == "before\n"
    assert processes_with(marker) == []


def test_sandbox_stops_a_cpu_hog(workspace: Path, plain_env: dict[str, str]) -> None:
    sandbox = Sandbox(SandboxSettings(cpu_time_s=1, wall_time_s=20), workspace)
    result = bash(sandbox, "while :; do :; done", plain_env)
    assert result.killed_by == "cpu_time"
    assert not result.timed_out


def test_sandbox_stops_a_command_that_fills_the_disk(
    workspace: Path, plain_env: dict[str, str]
) -> None:
    sandbox = Sandbox(SandboxSettings(max_write_mb=16, wall_time_s=60), workspace)
    ctx = ToolContext(workspace=workspace, env=plain_env, sandbox=sandbox)
    # Many files, each under maxFileMb: only the quota of the whole call stops it.
    script = "for i in $(seq 200); do head -c 1048576 /dev/zero > part$i; done"
    out = ShellTool().run(ShellArgs(command=script), ctx)
    assert not out.success
    assert out.error is not None and "tools.sandbox.maxWriteMb (16 MiB)" in out.error
    written = sum(p.stat().st_size for p in workspace.glob("part*"))
    assert 16 * 1024 * 1024 < written < 200 * 1024 * 1024
    assert bash(sandbox, "rm part*; echo again", plain_env).stdout == "again\n"


def test_sandbox_stops_a_memory_hog(workspace: Path, plain_env: dict[str, str]) -> None:
    sandbox = Sandbox(SandboxSettings(memory_mb=256), workspace)
    hog = "b = bytearray(1024 * 1024 * 1024); print('allocated', len(b))"
    result = sandbox.run(["python3", "-c", hog], env=plain_env)
    assert result.exit_code != 0
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


# -- where bubblewrap cannot run -------------------------------------------------------


def failing_bwrap(tmp_path: Path) -> Path:
    program = tmp_path / "bwrap-broken"
    program.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    program.chmod(0o755)
    return program


def test_sandbox_refuses_when_bwrap_is_missing(
    limits: SandboxSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    sandbox = Sandbox(limits, workspace, bwrap_path=tmp_path / "no-such-bwrap")
    assert not sandbox.available
    with pytest.raises(SandboxUnavailableError) as caught:
        sandbox.run(["true"], env=plain_env)
    assert UNSANDBOXED_KEY in str(caught.value)
    assert "missing" in caught.value.message


def test_sandbox_refuses_when_bwrap_fails_and_says_why(
    limits: SandboxSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    sandbox = Sandbox(limits, workspace, bwrap_path=failing_bwrap(tmp_path))
    with pytest.raises(SandboxUnavailableError) as caught:
        sandbox.run(["true"], env=plain_env)
    assert "No permissions to create new namespace" in caught.value.message
    assert caught.value.hint is not None and UNSANDBOXED_KEY in caught.value.hint


def test_sandbox_refuses_when_bwrap_cannot_start(
    limits: SandboxSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    not_executable = tmp_path / "bwrap-not-executable"
    not_executable.write_text("not a program")
    sandbox = Sandbox(limits, workspace, bwrap_path=not_executable)
    with pytest.raises(SandboxUnavailableError, match="did not start"):
        sandbox.check()


def test_sandbox_unsandboxed_when_allowed_keeps_limits_env_and_hardening(
    limits: SandboxSettings,
    workspace: Path,
    tmp_path: Path,
    plain_env: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = limits.model_copy(update={"allow_unsandboxed": True, "wall_time_s": 2.0})
    sandbox = Sandbox(settings, workspace, bwrap_path=failing_bwrap(tmp_path))
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.tools._sandbox"):
        result = bash(sandbox, "pwd; env", plain_env)
        bash(sandbox, "true", plain_env)
    assert not result.sandboxed
    lines = result.stdout.splitlines()
    assert lines[0] == str(workspace.resolve())
    assert "PAGER=cat" in lines and "GIT_TERMINAL_PROMPT=0" in lines
    assert sum(UNSANDBOXED_KEY in r.getMessage() for r in caplog.records) <= 1
    assert bash(sandbox, "yes", plain_env).killed_by == "max_output"
    marker = f"1300.{uuid.uuid4().int % 10**9}"
    left = bash(sandbox, f"sleep {marker} & echo started", plain_env)
    assert left.stdout == "started\n"
    assert processes_with(marker) == []
    timed = bash(sandbox, "sleep 30", plain_env)
    assert timed.timed_out


# -- bad input -----------------------------------------------------------------------------


def test_sandbox_rejects_a_workspace_that_is_not_a_directory(
    limits: SandboxSettings, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="not a directory"):
        Sandbox(limits, tmp_path / "missing")
    with pytest.raises(ToolError, match="root directory"):
        Sandbox(limits, Path("/"))


def test_sandbox_rejects_empty_argv_and_missing_cwd(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    with pytest.raises(ToolError, match="no command"):
        sandbox.run([], env=plain_env)
    with pytest.raises(ToolError, match="does not exist"):
        sandbox.run(["true"], env=plain_env, cwd=workspace / "nope")


def test_sandbox_refuses_without_prlimit(
    limits: SandboxSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    sandbox = Sandbox(limits, workspace, prlimit_path=tmp_path / "no-prlimit")
    with pytest.raises(SandboxUnavailableError, match="prlimit"):
        sandbox.run(["true"], env=plain_env)


def test_sandbox_reports_a_missing_program(sandbox: Sandbox, plain_env: dict[str, str]) -> None:
    result = sandbox.run(["no-such-program-ollm"], env=plain_env)
    assert result.exit_code != 0
    assert "no-such-program-ollm" in result.stderr


# -- pure parts ------------------------------------------------------------------------------


def test_harden_environment_appends_to_existing_git_config() -> None:
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "me"}
    hardened = harden_environment(env)
    assert hardened["GIT_CONFIG_COUNT"] == "2"
    assert hardened["GIT_CONFIG_KEY_0"] == "user.name"
    assert hardened["GIT_CONFIG_KEY_1"] == "credential.helper"
    assert hardened["GIT_CONFIG_VALUE_1"] == ""


def test_harden_environment_replaces_a_malformed_git_config_list() -> None:
    env = {"GIT_CONFIG_COUNT": "two", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "c"}
    hardened = harden_environment(env)
    assert hardened["GIT_CONFIG_COUNT"] == "1"
    assert hardened["GIT_CONFIG_KEY_0"] == "credential.helper"


env_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True)


@given(env=st.dictionaries(env_names, st.text(max_size=20), max_size=12))
def test_harden_environment_always_hardens_and_keeps_the_rest(env: dict[str, str]) -> None:
    hardened = harden_environment(env)
    assert hardened["PAGER"] == "cat" and hardened["GIT_TERMINAL_PROMPT"] == "0"
    assert "GIT_ASKPASS" not in hardened and "SSH_ASKPASS" not in hardened
    count = int(hardened["GIT_CONFIG_COUNT"])
    keys = [hardened[f"GIT_CONFIG_KEY_{i}"] for i in range(count)]
    assert keys[-1] == "credential.helper" and hardened[f"GIT_CONFIG_VALUE_{count - 1}"] == ""
    hardening = {"PAGER", "GIT_PAGER", "GIT_TERMINAL_PROMPT", "GIT_CONFIG_NOSYSTEM"}
    for name, value in env.items():
        if name in hardening or name.startswith("GIT_CONFIG_") or name.endswith("ASKPASS"):
            continue
        assert hardened[name] == value


@given(
    chunks=st.lists(
        st.tuples(st.sampled_from(["stdout", "stderr"]), st.binary(max_size=300)), max_size=20
    ),
    budget=st.integers(min_value=0, max_value=2000),
)
def test_output_budget_keeps_at_most_the_cap_and_counts_the_rest(
    chunks: list[tuple[str, bytes]], budget: int
) -> None:
    output = Output(budget)
    for stream, data in chunks:
        output.add(stream, data)
    produced = sum(len(data) for _, data in chunks)
    kept = len(output.kept["stdout"]) + len(output.kept["stderr"])
    assert kept == min(budget, produced)
    assert kept + sum(output.dropped.values()) == produced == output.total
    for stream in ("stdout", "stderr"):
        expected = b"".join(data for s, data in chunks if s == stream)
        assert expected.startswith(bytes(output.kept[stream]))
        note = f"[output truncated: {output.dropped[stream]} more bytes]"
        assert (note in output.text(stream, False)) == (output.dropped[stream] > 0)


def test_signal_cause_names_limits_and_signals() -> None:
    assert signal_cause(0) is None and signal_cause(1) is None
    assert signal_cause(128 + 24) == "cpu_time"
    assert signal_cause(128 + 9) == "SIGKILL"
    assert signal_cause(128 + 15) == "SIGTERM"
    assert signal_cause(255) is None
    assert signal_cause(128 + 32) is None  # a number that names no signal


def test_join_cgroup_strips_the_mount_root() -> None:
    assert join_cgroup("/sys/fs/cgroup/pids", "/", "/a/b") == Path("/sys/fs/cgroup/pids/a/b")
    assert join_cgroup("/sys/fs/cgroup", "/outer", "/outer/inner") == Path("/sys/fs/cgroup/inner")


def test_pids_cgroup_caps_processes_where_the_host_allows(
    limits: SandboxSettings,
) -> None:
    parent = PidsCgroup.parent()
    if parent is None:
        pytest.skip("this host lets no pids cgroup be made (not root, no delegation)")
    cgroup = PidsCgroup(parent, 5)
    try:
        assert (cgroup.path / "pids.max").read_text().strip() == "5"
        assert not cgroup.hit_limit()
    finally:
        cgroup.remove()
    assert not cgroup.path.exists()


def test_cgroup_candidates_from_proc_text(tmp_path: Path) -> None:
    memberships = "8:pids:/outer/me\n4:memory:/x\n0::/unified/me\n"
    delegated = tmp_path / "unified" / "me"
    delegated.mkdir(parents=True)
    (delegated / "cgroup.subtree_control").write_text("cpu pids\n")
    mounts = "\n".join(
        [
            "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw",
            "39 31 0:37 /outer /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids",
            "40 31 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
            f"41 31 0:39 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw",
            "short line",
        ]
    )
    assert cgroup_candidates(memberships, mounts) == [Path("/sys/fs/cgroup/pids/me"), delegated]
    (delegated / "cgroup.subtree_control").write_text("cpu\n")
    assert cgroup_candidates(memberships, mounts) == [Path("/sys/fs/cgroup/pids/me")]
    assert cgroup_candidates("0::/\n", "") == []


def test_pids_cgroup_parent_none_where_no_candidate_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PidsCgroup, "_candidates", staticmethod(lambda: [tmp_path / "a" / "b"]))
    assert PidsCgroup._find_parent() is None


def test_sandbox_without_a_cgroup_still_runs_and_says_maxprocesses_is_unenforced_as_root(
    sandbox: Sandbox,
    plain_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(PidsCgroup, "_checked", True)
    monkeypatch.setattr(PidsCgroup, "_parent", None)
    monkeypatch.setattr("ollm_cli.pipeline.tools._sandbox._warned", set())
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.tools._sandbox"):
        result = bash(sandbox, "echo fine", plain_env)
    assert result.stdout == "fine\n"
    warned = any("maxProcesses is not enforced" in r.getMessage() for r in caplog.records)
    assert warned == (os.geteuid() == 0)
