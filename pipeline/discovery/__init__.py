"""The FileDiscoveryService and git's ignore semantics.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.discovery._log import (
        configure_before_first_record,
        forget_configuration,
    )
    from ollm_cli.pipeline.discovery._service import (
        DiscoveryOptions,
        DiscoveryResult,
        FileDiscoveryService,
        ScanSettings,
    )

__all__ = [
    "DiscoveryOptions",
    "DiscoveryResult",
    "FileDiscoveryService",
    "ScanSettings",
    "configure_before_first_record",
    "forget_configuration",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_log": ("configure_before_first_record", "forget_configuration"),
        "_service": (
            "DiscoveryOptions",
            "DiscoveryResult",
            "FileDiscoveryService",
            "ScanSettings",
        ),
    },
)
