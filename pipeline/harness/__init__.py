"""Batch, load and soak runs built on the coordinator."""

from __future__ import annotations

from ollm_cli.pipeline.harness._batch_runner import (
    BatchProgress,
    BatchReport,
    BatchRunner,
    batch_failure,
)
from ollm_cli.pipeline.harness._batch_script import BatchScript, BatchScriptError, load_batch_script
from ollm_cli.pipeline.harness._load import (
    LATENCY_GROWTH_THRESHOLD,
    MEMORY_GROWTH_THRESHOLD,
    HarnessOptions,
    LoadHarness,
    LoadReport,
    build_report,
    draw_chart,
    latency_of_model,
    raise_if_failed,
    verify,
    write_samples_csv,
)

__all__ = [
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
    "draw_chart",
    "latency_of_model",
    "load_batch_script",
    "raise_if_failed",
    "verify",
    "write_samples_csv",
]
