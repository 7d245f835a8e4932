"""The ``shell`` tool: one ``bash -c`` command, run in the bubblewrap :class:`Sandbox`.

The model reads the exit code, stdout and stderr (each cut at the sandbox's
output cap with a note), and why the command stopped if a limit stopped it.

Example::

    out = ShellTool().run(ShellArgs(command="ls"), ctx)
    out.llm_content       # "Exit code: 0\\nStdout:\\nREADME.md\\n..."
"""

from __future__ import annotations

import shutil

from pydantic import Field

from ollm_cli.pipeline.tools._base import Tool, ToolArgs, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._sandbox import SandboxResult
from ollm_cli.pipeline.tools._workspace import resolve_in_workspace

_NAMED_PATHS = 12
"""At most this many protected paths are named to the model in one note."""


class ShellArgs(ToolArgs):
    """Arguments of ``shell``."""

    command: str = Field(min_length=1, description="The bash command line to run.")
    cwd: str | None = Field(
        default=None,
        description="Directory to run it in, relative to the workspace (default: the workspace).",
    )


def _stopped_because(result: SandboxResult, ctx: ToolContext) -> str | None:
    limits = ctx.sandbox.settings
    reasons = {
        "wall_time": f"it ran longer than the wall-time limit of {limits.wall_time_s:g} s",
        "cpu_time": f"it used more than the CPU-time limit of {limits.cpu_time_s} s",
        "max_processes": f"it started more than the limit of {limits.max_processes} processes",
        "max_output": f"it kept writing output far past the limit of "
        f"{limits.max_output_bytes} bytes",
        "disk_quota": f"it wrote more than tools.sandbox.maxWriteMb ({limits.max_write_mb} MiB) "
        f"to the workspace; what it wrote is still there (delete what you do not need, or "
        f"ask the user to raise the limit)",
        "max_file_size": f"it wrote a file larger than tools.sandbox.maxFileMb "
        f"({limits.max_file_mb} MiB)",
    }
    if result.killed_by is None:
        return None
    return reasons.get(result.killed_by, f"it was killed by {result.killed_by}")


def _control_note(result: SandboxResult) -> str | None:
    """What the model must know about the workspace's control paths after a run."""
    why = (
        "they hold configuration that OLLM or git runs later on the host, so tools may "
        "neither create nor change them"
    )
    if result.undone:
        return (
            f"Undone after the command: {'; '.join(result.undone)}; {why} (.ollm and .git "
            f"at any depth; use /tmp for a scratch git repository)."
        )
    output = result.stdout + result.stderr
    if result.protected_paths and "Read-only file system" in output:
        shown = ", ".join(result.protected_paths[:_NAMED_PATHS])
        if len(result.protected_paths) > _NAMED_PATHS:
            shown += f" and {len(result.protected_paths) - _NAMED_PATHS} more"
        return f"Read-only in the sandbox: {shown}; {why}."
    return None


class ShellTool(Tool[ShellArgs]):
    """Run a bash command in the workspace, inside the sandbox."""

    name = "shell"
    description = (
        "Run a bash command in the workspace, inside a sandbox: the workspace is "
        "writable except its .ollm and .git folders (at any depth), the rest of the "
        "system read-only, /tmp private, the network off unless configured; limited in "
        "time, memory, processes, output and disk use."
    )
    args_model = ShellArgs
    guards_control_paths = True
    runs_in_overlay = True

    def run(self, args: ShellArgs, ctx: ToolContext) -> ToolOutput:
        cwd = resolve_in_workspace(ctx.workspace, args.cwd) if args.cwd else None
        bash = shutil.which("bash") or "/bin/bash"
        result = ctx.sandbox.run(
            [bash, "-c", args.command], env=ctx.env, cwd=cwd, overlay=ctx.overlay
        )
        stopped = _stopped_because(result, ctx)
        note = _control_note(result)
        parts = [f"Exit code: {result.exit_code}"]
        if stopped:
            parts.append(f"Stopped: {stopped}.")
        parts.append("Stdout:\n" + (result.stdout or "(empty)"))
        parts.append("Stderr:\n" + (result.stderr or "(empty)"))
        if note:
            parts.append(note)
        llm_content = "\n".join(parts)
        display = (result.stdout + result.stderr).strip() or "(no output)"
        if result.undone:
            display = f"{display}\n{note}"
            return ToolOutput(
                llm_content=llm_content,
                return_display=display,
                success=False,
                error=f"the command changed protected control paths, undone: "
                f"{'; '.join(result.undone)}",
            )
        if stopped:
            error = f"the command was stopped: {stopped}"
            return ToolOutput(
                llm_content=llm_content, return_display=display, success=False, error=error
            )
        if result.exit_code != 0:
            return ToolOutput(
                llm_content=llm_content,
                return_display=display,
                success=False,
                error=f"the command exited with code {result.exit_code}",
            )
        return ToolOutput.ok(llm_content, display)
