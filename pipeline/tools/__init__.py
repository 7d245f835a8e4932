"""The tools the model can call, their registry, approval and execution.

Example::

    registry = ToolRegistry.builtin()
    registry.schemas()                     # what the provider is told
    executor = ToolExecutor(ToolSettings(), registry)
    policy = ApprovalPolicy(ToolSettings(), interactive=False)
    record = executor.execute(call, workspace=Path.cwd(), env=env, approval=policy.resolve(call))
    record.success, record.result.llm_content

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.tools._approval import ApprovalOutcome, ApprovalPolicy, ToolGrant
    from ollm_cli.pipeline.tools._base import Tool, ToolContext, ToolOutput
    from ollm_cli.pipeline.tools._executor import ToolExecutor
    from ollm_cli.pipeline.tools._registry import ToolRegistry
    from ollm_cli.pipeline.tools._sandbox import Sandbox, SandboxResult

__all__ = [
    "ApprovalOutcome",
    "ApprovalPolicy",
    "Sandbox",
    "SandboxResult",
    "Tool",
    "ToolContext",
    "ToolExecutor",
    "ToolGrant",
    "ToolOutput",
    "ToolRegistry",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_approval": (
            "ApprovalOutcome",
            "ApprovalPolicy",
            "ToolGrant",
        ),
        "_base": (
            "Tool",
            "ToolContext",
            "ToolOutput",
        ),
        "_executor": ("ToolExecutor",),
        "_registry": ("ToolRegistry",),
        "_sandbox": ("Sandbox", "SandboxResult"),
    },
)
