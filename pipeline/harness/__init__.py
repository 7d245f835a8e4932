"""Batch, load and soak runs built on the coordinator.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.harness._batch_runner import (
        BatchProgress,
        BatchReport,
        BatchRunner,
        batch_failure,
    )
    from ollm_cli.pipeline.harness._batch_script import (
        BatchScript,
        BatchScriptError,
        load_batch_script,
    )
    from ollm_cli.pipeline.harness._load_models import HarnessOptions, LoadReport
    from ollm_cli.pipeline.harness._load_report import (
        CHART_EXTRA_HINT,
        build_report,
        chart_available,
        draw_chart,
        latency_of_model,
        raise_if_failed,
        write_samples_csv,
    )
    from ollm_cli.pipeline.harness._load_runner import LoadHarness
    from ollm_cli.pipeline.harness._load_stats import (
        LATENCY_GROWTH_THRESHOLD,
        MEMORY_GROWTH_THRESHOLD,
    )
    from ollm_cli.pipeline.harness._load_verify import verify

__all__ = [
    "CHART_EXTRA_HINT",
    "LATENCY_GROWTH_THRESHOLD",
    "MEMORY_GROWTH_THRESHOLD",
    "BatchProgress",
    "BatchReport",
    "BatchRunner",
    "BatchScript",
    "BatchScriptError",
    "HarnessOptions",
    "LoadHarness",
    "LoadReport",
    "batch_failure",
    "build_report",
    "chart_available",
    "draw_chart",
    "latency_of_model",
    "load_batch_script",
    "raise_if_failed",
    "verify",
    "write_samples_csv",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_batch_runner": (
            "BatchProgress",
            "BatchReport",
            "BatchRunner",
            "batch_failure",
        ),
        "_batch_script": (
            "BatchScript",
            "BatchScriptError",
            "load_batch_script",
        ),
        "_load_models": ("HarnessOptions", "LoadReport"),
        "_load_report": (
            "CHART_EXTRA_HINT",
            "build_report",
            "chart_available",
            "draw_chart",
            "latency_of_model",
            "raise_if_failed",
            "write_samples_csv",
        ),
        "_load_runner": ("LoadHarness",),
        "_load_stats": (
            "LATENCY_GROWTH_THRESHOLD",
            "MEMORY_GROWTH_THRESHOLD",
        ),
        "_load_verify": ("verify",),
    },
)
