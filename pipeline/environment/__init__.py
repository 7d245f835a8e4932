"""The EnvironmentSanitizationService and the secret Redactor.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.base.redaction import (
        Redactor,
        default_redactor,
        find_secrets,
        redact,
    )
    from ollm_cli.pipeline.environment._logging import configure_logging
    from ollm_cli.pipeline.environment._sanitizer import (
        EnvDecision,
        EnvironmentSanitizationService,
        secret_name_word,
    )

__all__ = [
    "EnvDecision",
    "EnvironmentSanitizationService",
    "Redactor",
    "configure_logging",
    "default_redactor",
    "find_secrets",
    "redact",
    "secret_name_word",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_logging": ("configure_logging",),
        "ollm_cli.base.redaction": (
            "Redactor",
            "default_redactor",
            "find_secrets",
            "redact",
        ),
        "_sanitizer": (
            "EnvDecision",
            "EnvironmentSanitizationService",
            "secret_name_word",
        ),
    },
)
