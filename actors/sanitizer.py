"""The environment-sanitization actor: what a tool may see of the environment."""

from __future__ import annotations

from collections.abc import Mapping

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.environment import EnvDecision, EnvironmentSanitizationService


class SanitizerShell(ShellBase):
    """Sanitizes environments for tool executions (Requirement 7.8)."""

    def __init__(self, settings: OllmSettings) -> None:
        self.sanitizer = EnvironmentSanitizationService(settings.services.environment)

    def sanitize(self, env: Mapping[str, str]) -> dict[str, str]:
        return self.sanitizer.sanitize(env)

    def explain(self, env: Mapping[str, str]) -> list[EnvDecision]:
        return self.sanitizer.explain(env)

    def removed_secrets(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables removed as secrets, by name (for redacting recorded text)."""
        return self.sanitizer.removed_secrets(env)
