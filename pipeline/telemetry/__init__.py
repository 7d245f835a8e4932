"""x

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.telemetry._otel import (
        Telemetry,
        TraceCarrier,
        actor_span,
        flush_telemetry,
        telemetry_for,
        trace_carrier,
    )
    from ollm_cli.pipeline.telemetry._steps import (
        traced_compression,
        traced_model_round,
        traced_tool,
        traced_turn,
    )

__all__ = [
    "Telemetry",
    "TraceCarrier",
    "actor_span",
    "flush_telemetry",
    "telemetry_for",
    "trace_carrier",
    "traced_compression",
    "traced_model_round",
    "traced_tool",
    "traced_turn",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_otel": (
            "Telemetry",
            "TraceCarrier",
            "actor_span",
            "flush_telemetry",
            "telemetry_for",
            "trace_carrier",
        ),
        "_steps": (
            "traced_compression",
            "traced_model_round",
            "traced_tool",
            "traced_turn",
        ),
    },
)
