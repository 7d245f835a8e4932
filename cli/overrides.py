"""Command-line flags that override the loaded settings for one invocation (their
typer declarations are in :mod:`ollm_cli.cli.options`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ollm_cli.config.settings import OllmSettings


class ProviderChoice(StrEnum):
    auto = "auto"
    ollama = "ollama"
    openai = "openai"
    embedded = "embedded"
    simulated = "simulated"


class RuntimeChoice(StrEnum):
    service = "service"
    ray = "ray"
    inprocess = "inprocess"


def apply_overrides(
    settings: OllmSettings,
    *,
    model: str | None = None,
    provider: str | None = None,
    runtime: str | None = None,
    ray_address: str | None = None,
    no_loop_detection: bool = False,
) -> OllmSettings:
    """``settings`` with the given flags applied: a copy validated like the file, or
    ``settings`` itself when no flag is given."""
    if not (model or provider or runtime or ray_address or no_loop_detection):
        return settings  # no flag: nothing to validate again
    # the sections set (the others at their defaults), each validated again alone
    data: dict[str, Any] = settings.changed_sections()
    if model:
        data.setdefault("provider", {})["model"] = model
    if provider:
        data.setdefault("provider", {})["name"] = provider
    if runtime:
        data.setdefault("runtime", {})["kind"] = runtime
    if ray_address:
        data.setdefault("runtime", {})["rayAddress"] = ray_address
        if (runtime or settings.runtime.kind) == "inprocess":  # an address names a cluster
            data["runtime"]["kind"] = "service"
    if no_loop_detection:
        data.setdefault("services", {}).setdefault("loopDetection", {})["enabled"] = False
    return OllmSettings.validate_sections(data)
