"""The runtime itself: shutting down after a failed start, in-process fault paths."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.runtime import create_runtime


def test_shutdown_of_a_runtime_that_never_started(tmp_path: Path) -> None:
    """A failed start is followed by shutdown(): it must not hide the start's error."""
    runtime = create_runtime(OllmSettings(), tmp_path, kind="inprocess")
    asyncio.run(runtime.shutdown())  # no AttributeError for services never made


def test_in_process_services_cannot_be_killed_and_report_memory(tmp_path: Path) -> None:
    settings = OllmSettings()
    settings.provider.name = "simulated"

    async def scenario() -> None:
        runtime = create_runtime(settings, tmp_path, kind="inprocess")
        await runtime.start()
        try:
            assert await runtime.recording.memory_rss() > 0
            await runtime.recording.wait_alive()
            with pytest.raises(OllmError, match="cannot be killed"):
                await runtime.recording.kill()
            assert runtime.tool_worker() in runtime.tool_workers
            assert runtime.compressor() in runtime.compression
        finally:
            await runtime.shutdown()

    asyncio.run(scenario())
