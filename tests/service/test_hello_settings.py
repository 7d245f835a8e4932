"""The settings a client sends in its hello: the sections it changed, validated whole
by the service (a client validates only the sections its config sets)."""

from __future__ import annotations

import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ConfigError
from ollm_cli.pipeline.service._messages import Hello
from ollm_cli.pipeline.service._socket import _settings


def _hello(settings: dict[str, object]) -> Hello:
    return Hello(version="1", pid=1, started=None, settings=settings, workspace="/", environment={})


def test_the_service_validates_the_sections_a_client_changed() -> None:
    sent = OllmSettings.validate_sections({"provider": {"model": "qwen3"}}).changed_sections()
    assert _settings(_hello(sent)) == OllmSettings.model_validate({"provider": {"model": "qwen3"}})
    assert _settings(_hello({})) == OllmSettings.defaults()


def test_settings_the_service_refuses_are_named_by_key_never_by_value() -> None:
    """A client of another schema: refused with the keys, and no value (a value may be
    a secret), with what to do."""
    with pytest.raises(ConfigError) as refused:
        _settings(_hello({"provider": {"name": "sk-secret-1234"}, "nope": {"x": "hunter2"}}))
    message = refused.value.message
    assert "provider.name" in message and "nope" in message
    assert "sk-secret-1234" not in message and "hunter2" not in message
    assert refused.value.hint and "ollm service stop" in refused.value.hint
