"""Command-line flags that override the loaded settings for one invocation, and
the options ``ollm run``, ``batch``, ``load`` and ``soak`` share to set them."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

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


RuntimeOption = Annotated[
    RuntimeChoice | None,
    typer.Option(
        "--runtime",
        help="Where the services run: the long-lived local service, a Ray pipeline for "
        "this command alone, or this process (default from config: service).",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Use this Ray cluster instead of the local service: the pipeline lives there "
        "(with --runtime ray: actors for this command alone).",
    ),
]
NoLoopDetectionOption = Annotated[
    bool, typer.Option("--no-loop-detection", help="Turn loop detection off.")
]


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
        if data["runtime"]["kind"] == "inprocess":  # an address names a Ray cluster
            data["runtime"]["kind"] = "service"
    if no_loop_detection:
        data["services"]["loopDetection"]["enabled"] = False
    return OllmSettings.model_validate(data)
