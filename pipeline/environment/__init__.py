"""The EnvironmentSanitizationService and the secret Redactor."""

from __future__ import annotations

from ollm_cli.pipeline.environment._redaction import Redactor, configure_logging, redact
from ollm_cli.pipeline.environment._sanitizer import EnvDecision, EnvironmentSanitizationService

__all__ = [
    "EnvDecision",
    "EnvironmentSanitizationService",
    "Redactor",
    "configure_logging",
    "redact",
]
