"""The model-provider actor: gives the ProviderService an inbox.

Answers are polled in batches (see :mod:`ollm_cli.pipeline.providers._service`).
"""

from __future__ import annotations

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.providers import (
    ChatBatch,
    ChatOpening,
    ChatRequest,
    ModelInfo,
    ProviderService,
)


class ProviderShell(ShellBase):
    """Serves chats of many conversations at once from one provider."""

    def __init__(self, settings: OllmSettings) -> None:
        self.service = ProviderService(settings.provider)

    def provider_name(self) -> str:
        return self.service.provider_name()

    def chat_begin(self, opening: ChatOpening) -> ChatBatch:
        return self.service.chat_begin(opening)

    def chat_next(self, stream_id: str) -> ChatBatch:
        return self.service.chat_next(stream_id)

    def chat_cancel(self, stream_id: str) -> None:
        self.service.chat_cancel(stream_id)

    def forget(self, conversation: str) -> None:
        self.service.forget(conversation)

    def complete(self, request: ChatRequest) -> str:
        return self.service.complete(request)

    def model_info(self, model: str) -> ModelInfo:
        return self.service.model_info(model)

    def default_model(self) -> str:
        return self.service.default_model()

    def list_models(self) -> list[str]:
        return self.service.list_models()

    def close(self) -> None:
        self.service.close()
