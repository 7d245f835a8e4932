"""``ollm models``: the models the provider has, as ``ollm run`` would choose it.

Ollama's are read from ``/api/tags``, an OpenAI-compatible server's from
``/v1/models``, and the embedded provider has the one GGUF file it runs. A
provider that does not answer is a :class:`~ollm_cli.pipeline.errors.ProviderError`
(exit code 6) that says where it was looked for and how to start it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import BaseModel
from rich.markup import escape

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.overrides import ProviderChoice, apply_overrides
from ollm_cli.cli.state import loaded_settings

if TYPE_CHECKING:
    from ollm_cli.pipeline.providers import Provider


class ModelEntry(BaseModel):
    """One model of the listing."""

    name: str
    configured: bool
    """It is ``provider.model`` (or ``--model``)."""


class ModelListing(BaseModel):
    """What ``ollm models --json`` prints."""

    provider: str
    where: str
    """The server's address (no credentials) or the model file."""
    configured_model: str | None
    models: list[ModelEntry]


def _where(provider: Provider) -> str:
    from ollm_cli.pipeline.providers import (
        EmbeddedProvider,
        OllamaProvider,
        OpenAIProvider,
        display_host,
        display_url,
    )

    if isinstance(provider, OllamaProvider):
        return display_host(provider.settings.host)
    if isinstance(provider, OpenAIProvider):
        return display_url(provider.settings.base_url)
    if isinstance(provider, EmbeddedProvider):
        return str(provider.model_path)
    return provider.name


def list_provider_models(provider: Provider, configured: str | None) -> ModelListing:
    """The models ``provider`` has, the configured one marked."""
    names = provider.list_models()
    return ModelListing(
        provider=provider.name,
        where=_where(provider),
        configured_model=configured,
        models=[ModelEntry(name=name, configured=name == configured) for name in names],
    )


def models(
    provider_name: Annotated[
        ProviderChoice | None,
        typer.Option("--provider", help="Ask this provider (default from config: auto)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the models the provider has: Ollama's pulled models, an OpenAI-compatible
    server's /v1/models, or the embedded model file.

    With `provider: auto`, the provider `ollm run` would use now. Exit code 6 when
    the provider does not answer.

    Examples: `ollm models`, `ollm models --provider ollama --json`
    """
    from ollm_cli.pipeline.providers import create_provider

    settings = apply_overrides(
        loaded_settings().settings, provider=provider_name.value if provider_name else None
    )
    with create_provider(settings.provider) as provider:
        listing = list_provider_models(provider, settings.provider.model)
    if json_output:
        print_json(listing)
        return
    count = len(listing.models)
    console.print(
        f"[bold]{escape(listing.provider)}[/] at {escape(listing.where)}: "
        f"{count} model{'' if count == 1 else 's'}",
        soft_wrap=True,
    )
    for entry in listing.models:
        mark = "  [green](provider.model)[/]" if entry.configured else ""
        console.print(f"  {escape(entry.name)}{mark}", soft_wrap=True)
    configured = listing.configured_model
    if (
        configured
        and listing.provider != "embedded"
        and not any(m.configured for m in listing.models)
    ):
        hint = f"`ollama pull {configured}`" if listing.provider == "ollama" else "load it"
        console.print(
            f"[yellow]provider.model {escape(configured)} is not among them: {escape(hint)}, "
            "or set provider.model to one of these[/]",
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    """Add ``models`` to ``app``."""
    app.command("models")(models)
