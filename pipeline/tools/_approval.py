"""Who may run a tool: the approval policy of ``tools.approval``.

Each tool is ``allow``, ``ask`` or ``deny`` (``tools.defaultApproval`` for a
tool the config does not name). ``ask`` asks the user through a callback the
CLI gives (``ollm run``); where nobody can answer (batch, or no callback),
ask means deny. A :class:`ToolGrant` (``ollm run --allow-tools NAME,...`` or
``--approve auto``) turns a conversation's ``ask`` into ``allow`` for the tools it
names, or for every tool; it never overrides a ``deny`` of the config, which keeps
the tool out of the model's reach altogether.

Example::

    policy = ApprovalPolicy(ToolSettings(), interactive=True, ask=confirm_with_user)
    outcome = policy.resolve(call)
    outcome.approved, outcome.reason
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from ollm_cli.config.settings import Approval, ToolSettings
from ollm_cli.pipeline.records import ToolCallPart

logger = logging.getLogger(__name__)


class ApprovalOutcome(BaseModel):
    """Whether one tool call may run, and why."""

    model_config = ConfigDict(defer_build=True)  # built when first used, not at import

    approved: bool
    decision: Approval
    reason: str

    @classmethod
    def allowed(cls, reason: str = "allowed") -> ApprovalOutcome:
        """An approval given without consulting a policy (tests, trusted callers)."""
        return cls(approved=True, decision="allow", reason=reason)


class ToolGrant(BaseModel):
    """What a command allows one conversation beyond the config's ``ask``: the tools
    it names (``--allow-tools``), or every tool (``--approve auto``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tools: frozenset[str] = frozenset()
    every_tool: bool = False

    def allows(self, tool_name: str) -> bool:
        """Whether ``tool_name`` runs without asking (where the config says ``ask``)."""
        return self.every_tool or tool_name in self.tools


class ApprovalPolicy:
    """The approval of each tool from config, and asking the user where it says ``ask``."""

    def __init__(
        self,
        settings: ToolSettings,
        *,
        interactive: bool,
        ask: Callable[[ToolCallPart], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.interactive = interactive
        self.ask = ask

    def decide(self, tool_name: str, grant: ToolGrant | None = None) -> Approval:
        """The configured decision for ``tool_name``; ``ask`` becomes ``allow`` for a
        tool ``grant`` allows (a config's ``deny`` stays)."""
        decision = self.settings.approval.get(tool_name, self.settings.default_approval)
        if decision == "ask" and grant is not None and grant.allows(tool_name):
            return "allow"
        return decision

    def resolve(self, call: ToolCallPart) -> ApprovalOutcome:
        """Whether ``call`` may run: the policy, and the user's answer where it asks."""
        decision = self.decide(call.name)
        key = f"tools.approval.{call.name}"
        if decision == "allow":
            return ApprovalOutcome(approved=True, decision=decision, reason=f"{key} is allow")
        if decision == "deny":
            return ApprovalOutcome(
                approved=False,
                decision=decision,
                reason=f"the {call.name} tool is denied by the config ({key}: deny)",
            )
        if not self.interactive or self.ask is None:
            return ApprovalOutcome(
                approved=False,
                decision=decision,
                reason=f"the {call.name} tool needs the user's approval ({key}: ask) and "
                f"nobody can answer in a non-interactive run; set {key}: allow to let it run",
            )
        approved = bool(self.ask(call))
        logger.info("approval: user %s %s", "approved" if approved else "declined", call.name)
        return ApprovalOutcome(
            approved=approved,
            decision=decision,
            reason="approved by the user" if approved else "the user declined this call",
        )
