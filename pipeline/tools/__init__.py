"""The tools the model can call, their registry, approval and execution.

Example::

    registry = ToolRegistry.builtin()
    registry.schemas()                     # what the provider is told
    executor = ToolExecutor(ToolSettings(), registry)
    policy = ApprovalPolicy(ToolSettings(), interactive=False)
    record = executor.execute(call, workspace=Path.cwd(), env=env, approval=policy.resolve(call))
    record.success, record.result.llm_content
"""

from pipeline.tools.approval import ApprovalOutcome, ApprovalPolicy
from pipeline.tools.base import Tool, ToolContext, ToolOutput
from pipeline.tools.executor import ToolExecutor
from pipeline.tools.registry import ToolRegistry

__all__ = [
    "ApprovalOutcome",
    "ApprovalPolicy",
    "Tool",
    "ToolContext",
    "ToolExecutor",
    "ToolOutput",
    "ToolRegistry",
]
