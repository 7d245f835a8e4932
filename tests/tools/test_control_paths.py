"""The workspace's control paths, attacked from inside real bubblewrap and through
the file tools: nothing a tool does may leave a ``.ollm`` or ``.git`` that OLLM or
git would later run on the host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ollm_cli.config.settings import SandboxSettings, ToolSettings
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.tools import Tool, ToolContext, ToolExecutor, ToolOutput, ToolRegistry
from ollm_cli.pipeline.tools._base import ToolArgs
from ollm_cli.pipeline.tools._control_paths import ControlGuard, hooks_path, survey
from ollm_cli.pipeline.tools._files import (
    EditFileArgs,
    EditFileTool,
    WriteFileArgs,
    WriteFileTool,
)
from ollm_cli.pipeline.tools._sandbox import Sandbox, SandboxResult
from ollm_cli.pipeline.tools._shell import ShellArgs, ShellTool

HOOK = "hooks:\n  - event: session:start\n    command: touch /tmp/x\n"
PLANT = f"mkdir -p .ollm; printf '{HOOK}' > .ollm/config.yaml"


def bash(sandbox: Sandbox, script: str, env: dict[str, str]) -> SandboxResult:
    return sandbox.run(["bash", "-c", script], env=env)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_planting_a_hook_config_in_a_workspace_without_ollm_folder_fails(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    result = bash(sandbox, PLANT, plain_env)
    assert result.exit_code != 0
    assert "Read-only file system" in result.stderr
    assert ".ollm" in result.protected_paths and ".git" in result.protected_paths
    # The cover of the run is gone, and nothing was planted.
    assert not (workspace / ".ollm").exists()
    assert not (workspace / ".git").exists()


def test_planting_a_hook_config_in_an_existing_ollm_folder_fails(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / ".ollm").mkdir()
    (workspace / ".ollm" / "config.yaml").write_text("tools: {}\n")
    result = bash(sandbox, f"{PLANT}; rm -rf .ollm; mv .ollm gone", plain_env)
    assert result.exit_code != 0
    assert (workspace / ".ollm" / "config.yaml").read_text() == "tools: {}\n"
    assert not (workspace / "gone").exists()


def test_git_init_at_the_top_fails_and_a_nested_one_is_removed(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    top = bash(sandbox, "git init -q .", plain_env)
    assert top.exit_code != 0 and "Read-only file system" in top.stderr
    nested = bash(
        sandbox,
        "git init -q sub && printf '#!/bin/sh\\ntouch /tmp/x\\n' > sub/.git/hooks/pre-commit "
        "&& git -C sub config core.fsmonitor 'touch /tmp/x' && echo planted",
        plain_env,
    )
    assert nested.stdout == "planted\n"
    assert nested.undone == ["removed sub/.git"]
    assert (workspace / "sub").is_dir() and not (workspace / "sub" / ".git").exists()
    assert not (workspace / ".git").exists()


def test_an_existing_nested_repository_is_read_only(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    git("init", "-q", "deep/lib", cwd=workspace)
    config = workspace / "deep" / "lib" / ".git" / "config"
    before = config.read_text()
    result = bash(
        sandbox,
        "echo '[core] fsmonitor = touch /tmp/x' >> deep/lib/.git/config; "
        "echo x > deep/lib/.git/hooks/post-checkout",
        plain_env,
    )
    assert result.exit_code != 0
    assert config.read_text() == before
    assert not (workspace / "deep" / "lib" / ".git" / "hooks" / "post-checkout").exists()
    assert "deep/lib/.git" in result.protected_paths


def test_a_nested_workspace_config_is_removed(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    script = f"mkdir -p pkg/.OLLM && printf '{HOOK}' > pkg/.OLLM/config.yaml"
    result = bash(sandbox, script, plain_env)
    assert result.exit_code == 0
    assert result.undone == ["removed pkg/.OLLM"]
    assert not (workspace / "pkg" / ".OLLM").exists()


def test_a_symlink_to_a_control_folder_writes_nothing(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / ".ollm").mkdir()
    result = bash(
        sandbox,
        f"ln -s .ollm link && printf '{HOOK}' > link/config.yaml; "
        "ln -s ../.git sub-git; mkdir -p sub; ln -s ../.ollm sub/.git",
        plain_env,
    )
    assert not (workspace / ".ollm" / "config.yaml").exists()
    assert not os.path.lexists(workspace / "sub" / ".git")
    assert result.undone == ["removed sub/.git"]


def test_a_replaced_git_symlink_is_put_back(
    sandbox: Sandbox, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    real = tmp_path / "elsewhere.git"
    git("init", "-q", "--bare", str(real), cwd=tmp_path)
    (workspace / ".git").symlink_to(real)
    result = bash(sandbox, "rm .git && mkdir .git && echo x > .git/config", plain_env)
    assert (workspace / ".git").is_symlink()
    assert os.readlink(workspace / ".git") == str(real)
    assert "restored the symlink .git" in result.undone


def test_a_gitfile_target_inside_the_workspace_is_read_only(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    git("init", "-q", "--separate-git-dir", str(workspace / "gitdata"), "app", cwd=workspace)
    result = bash(sandbox, "echo x > gitdata/hooks/pre-commit", plain_env)
    assert result.exit_code != 0
    assert "gitdata" in result.protected_paths
    assert not (workspace / "gitdata" / "hooks" / "pre-commit").exists()


def test_the_hooks_path_of_the_repository_is_covered_even_when_absent(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    git("init", "-q", ".", cwd=workspace)
    git("config", "core.hooksPath", ".husky", cwd=workspace)
    assert hooks_path(workspace / ".git", workspace) == workspace / ".husky"
    result = bash(sandbox, "mkdir -p .husky; echo 'touch /tmp/x' > .husky/pre-commit", plain_env)
    assert result.exit_code != 0
    assert ".husky" in result.protected_paths
    assert not (workspace / ".husky").exists()


def test_a_folder_made_a_bare_repository_loses_its_head(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    script = (
        "mkdir -p objects refs && echo 'ref: refs/heads/main' > HEAD && "
        "printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > config"
    )
    result = bash(sandbox, script, plain_env)
    assert result.exit_code == 0
    assert not (workspace / "HEAD").exists()
    assert any("bare git repository" in note for note in result.undone)
    assert survey(workspace).git_dirs == frozenset()


def test_shell_tool_tells_the_model_which_path_is_protected(ctx: ToolContext) -> None:
    refused = ShellTool().run(ShellArgs(command=PLANT), ctx)
    assert not refused.success
    assert "Read-only in the sandbox: .ollm, .git" in refused.llm_content
    undone = ShellTool().run(ShellArgs(command="git init -q sub"), ctx)
    assert not undone.success
    assert undone.error is not None and "removed sub/.git" in undone.error
    assert "use /tmp for a scratch git repository" in undone.llm_content


@pytest.mark.parametrize(
    "path", [".ollm/config.yaml", "sub/.git/config", "a/b/.OLLM/config.yaml", "link/config.yaml"]
)
def test_write_file_refuses_control_paths_at_any_depth(
    ctx: ToolContext, workspace: Path, path: str
) -> None:
    (workspace / "sub" / ".git").mkdir(parents=True)
    (workspace / "link").symlink_to("sub/.git")
    with pytest.raises(ToolError, match="protected"):
        WriteFileTool().run(WriteFileArgs(path=path, content=HOOK), ctx)
    assert not (workspace / ".ollm").exists()
    assert list((workspace / "sub" / ".git").iterdir()) == []


def test_edit_file_refuses_a_nested_git_config(ctx: ToolContext, workspace: Path) -> None:
    git("init", "-q", "lib", cwd=workspace)
    with pytest.raises(ToolError, match="protected"):
        EditFileTool().run(
            EditFileArgs(
                path="lib/.git/config", old_string="[core]", new_string="[core]\n\tfsmonitor = x"
            ),
            ctx,
        )


def test_the_last_concurrent_run_removes_the_cover(workspace: Path) -> None:
    first = ControlGuard(workspace).__enter__()
    second = ControlGuard(workspace).__enter__()
    assert first.placeholders == [workspace / ".ollm", workspace / ".git"]
    assert second.placeholders == [] and workspace / ".ollm" in second.protected()
    first.__exit__(None, None, None)
    assert (workspace / ".ollm").is_dir()  # the second run still relies on it
    second.__exit__(None, None, None)
    assert not (workspace / ".ollm").exists() and not (workspace / ".git").exists()


class NaiveWriteArgs(ToolArgs):
    path: str
    content: str


class NaiveWriteTool(Tool[NaiveWriteArgs]):
    """What an extension might add: a writer with no path checks at all."""

    name = "naive_write"
    description = "Write a file."
    args_model = NaiveWriteArgs

    def run(self, args: NaiveWriteArgs, ctx: ToolContext) -> ToolOutput:
        target = ctx.workspace / args.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args.content)
        return ToolOutput.ok("written")


@pytest.mark.parametrize(
    "path", [".ollm/config.yaml", "sub/.ollm/config.yaml", ".git/hooks/pre-commit", ".git/config"]
)
def test_what_an_extension_tool_does_to_control_paths_is_undone(
    workspace: Path, plain_env: dict[str, str], path: str
) -> None:
    git("init", "-q", ".", cwd=workspace)
    (workspace / ".ollm").mkdir()
    (workspace / ".ollm" / "config.yaml").write_text("tools: {}\n")
    config = (workspace / ".git" / "config").read_bytes()
    registry = ToolRegistry.builtin()
    registry.register(NaiveWriteTool())
    executor = ToolExecutor(ToolSettings(), registry, workspace=workspace)
    part = ToolCallPart(id="c1", name="naive_write", args={"path": path, "content": HOOK})
    record = executor.execute(part, plain_env, True)
    assert not record.success
    assert record.error is not None and "undone" in record.error
    assert path.split("/")[0] in record.error
    assert (workspace / ".ollm" / "config.yaml").read_text() == "tools: {}\n"
    assert not (workspace / "sub" / ".ollm").exists()
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / ".git" / "config").read_bytes() == config
    harmless = ToolCallPart(id="c2", name="naive_write", args={"path": "a.txt", "content": "x"})
    assert executor.execute(harmless, plain_env, True).success


def test_a_folder_moved_with_its_repository_keeps_it(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    git("init", "-q", "old/lib", cwd=workspace)
    (workspace / "new").mkdir()
    result = bash(sandbox, "mv old/lib new/lib", plain_env)
    assert result.exit_code == 0 and result.undone == []
    assert (workspace / "new" / "lib" / ".git" / "HEAD").is_file()


def test_a_later_survey_reuses_unchanged_folders_and_sees_changed_ones(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ollm_cli.pipeline.tools._control_paths as control_paths

    monkeypatch.setattr(control_paths, "_CLOCK_SLACK_NS", 0)
    for name in ("a", "b/c"):
        (workspace / name).mkdir(parents=True)
    first = survey(workspace)
    # An unchanged folder is not listed again: a planted record shows through.
    fake = (workspace / "a" / ".git", control_paths._Identity(0, 1, 0, None))
    record = first.folders[str(workspace / "a")]
    forged = first._replace(
        folders={**first.folders, str(workspace / "a"): record._replace(controls=(fake,))}
    )
    assert workspace / "a" / ".git" in survey(workspace, forged).entries
    # A command that plants a .git and sets its folder's times back is still seen.
    bash(sandbox, "true", plain_env)  # the sandbox's own survey, to start from
    result = bash(sandbox, "git init -q b/c && touch -d 2001-01-01 b/c b", plain_env)
    assert result.undone == ["removed b/c/.git"]
    assert not (workspace / "b" / "c" / ".git").exists()


def test_the_hooks_path_of_the_enclosing_repository_is_covered(
    tmp_path: Path, plain_env: dict[str, str], limits: SandboxSettings
) -> None:
    repository = tmp_path / "repo"
    git("init", "-q", str(repository), cwd=tmp_path)
    git("config", "core.hooksPath", "tools/hooks", cwd=repository)
    git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@x",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "0",
        cwd=repository,
    )
    workspace = repository / "tools"
    workspace.mkdir()
    git("worktree", "add", "-q", "--detach", str(workspace / "wt"), cwd=repository)
    sandbox = Sandbox(limits, workspace)
    result = bash(sandbox, "mkdir -p hooks && echo 'touch /tmp/x' > hooks/pre-commit", plain_env)
    assert result.exit_code != 0 and "hooks" in result.protected_paths
    assert not (workspace / "hooks").exists()
    assert "wt/.git" in result.protected_paths  # the linked worktree's gitfile


def test_the_note_names_a_dozen_protected_paths_at_most(ctx: ToolContext, workspace: Path) -> None:
    for index in range(20):
        (workspace / f"m{index:02d}" / ".git").mkdir(parents=True)
    out = ShellTool().run(ShellArgs(command="touch m00/.git/config"), ctx)
    assert not out.success
    assert "and 10 more; they hold configuration" in out.llm_content


def test_a_planted_entry_that_cannot_be_removed_is_reported(workspace: Path) -> None:
    guard = ControlGuard(workspace).__enter__()
    planted = workspace / "sub" / ".git"
    planted.mkdir(parents=True)
    if subprocess.run(["chattr", "+i", str(planted)], capture_output=True).returncode != 0:
        guard.__exit__(None, None, None)
        pytest.skip("no immutable attribute on this file system")
    try:
        [note] = guard.finish()
        assert note.startswith("could NOT remove sub/.git (Operation not permitted)")
    finally:
        subprocess.run(["chattr", "-i", str(planted)], check=True)
        guard.__exit__(None, None, None)
