"""Command-line flags that override the loaded settings for one invocation."""

from __future__ import annotations

from typing import Any

from config.settings import OllmSettings


def apply_overrides(
    settings: OllmSettings,
    *,
    model: str | None = None,
    provider: str | None = None,
    runtime: str | None = None,
    ray_address: str | None = None,
    no_loop_detection: bool = False,
) -> OllmSettings:
    """A copy of ``settings`` with the given flags applied (validated like the file)."""
    data: dict[str, Any] = settings.model_dump(by_alias=True)
    if model:
        data["provider"]["model"] = model
    if provider:
        data["provider"]["name"] = provider
    if runtime:
        data["runtime"]["kind"] = runtime
    if ray_address:
        data["runtime"]["rayAddress"] = ray_address
        data["runtime"]["kind"] = "ray"
    if no_loop_detection:
        data["services"]["loopDetection"]["enabled"] = False
    return OllmSettings.model_validate(data)
