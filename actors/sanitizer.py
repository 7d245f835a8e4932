"""The environment-sanitization actor: what a tool may see of the environment."""

from __future__ import annotations

from collections.abc import Mapping

from actors.shell import ShellBase
from config.settings import OllmSettings
from pipeline.env_sanitizer import EnvDecision, EnvironmentSanitizer


class SanitizerShell(ShellBase):
    """Sanitizes environments for tool executions (Requirement 7.8)."""

    def __init__(self, settings: OllmSettings) -> None:
        self.sanitizer = EnvironmentSanitizer(settings.services.environment)

    def sanitize(self, env: Mapping[str, str]) -> dict[str, str]:
        return self.sanitizer.sanitize(env)

    def explain(self, env: Mapping[str, str]) -> list[EnvDecision]:
        return self.sanitizer.explain(env)

    def removed_secrets(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables removed as secrets, by name (for redacting recorded text)."""
        return self.sanitizer.removed_secrets(env)
