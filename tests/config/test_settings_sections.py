"""The configuration validated section by section, as a warm ``ollm run -p`` does.

``OllmSettings.validate_sections`` must give what validating the whole model gives:
the same settings, or the same error naming the same keys; ``changed_sections`` (what
a client sends the service in its hello) must give the same settings back; and the
flags (``--model``, ``--runtime``...) must apply as before. The point of it all, a
command that does not build the whole model's validator, is checked in a fresh
process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ollm_cli.cli.overrides import apply_overrides
from ollm_cli.config.loader import load_settings
from ollm_cli.config.settings import OllmSettings

LEAVES: list[tuple[tuple[str, ...], list[Any]]] = [
    (("provider", "name"), ["ollama", "openai", "nope", 3]),
    (("provider", "model"), ["qwen3", None, ["x"]]),
    (("provider", "ollama", "host"), ["http://127.0.0.1:11434", "ftp://x", 5]),
    (("provider", "embedded", "maxTokens"), [64, 0, "many"]),
    (("services", "compression", "threshold"), [0.7, 2.0, "high"]),
    (("services", "session", "dataDir"), ["~/sessions", 7]),
    (("services", "loopDetection", "enabled"), [False, "maybe"]),
    (("services", "environment", "denyPatterns"), [["*_X"], ["bad pattern ["]]),
    (("runtime", "kind"), ["service", "inprocess", "cloud"]),
    (("runtime", "rayAddress"), ["127.0.0.1:6379", None]),
    (("runtime", "service", "idleTimeout"), [60, -1]),
    (("tools", "approval", "shell"), ["allow", "sometimes"]),
    (("tools", "sandbox", "memoryMb"), [512, 1]),
    (("snapshots", "maxCount"), [3, 0]),
    (("telemetry", "otlpEndpoint"), ["http://127.0.0.1:4318", 1.5]),
    (("hooks",), [[{"event": "session:start", "command": "true"}], [{"event": "x"}], "no"]),
    (("provider",), ["not a mapping", None]),
    (("servces", "x"), [1]),
    (("provider", "nmae"), ["ollama"]),
]


@st.composite
def layers(draw: st.DrawFn) -> dict[str, Any]:
    """A merged config: a few keys of :data:`LEAVES`, each with one of its values
    (valid or not), nested as the loader merges them."""
    picked = draw(st.lists(st.sampled_from(LEAVES), max_size=5, unique_by=lambda leaf: leaf[0]))
    merged: dict[str, Any] = {}
    for path, values in picked:
        cursor = merged
        for key in path[:-1]:
            if not isinstance(cursor.get(key), dict):
                cursor[key] = {}
            cursor = cursor[key]
        cursor[path[-1]] = draw(st.sampled_from(values))
    return merged


def _outcome(validate: Any, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        result = validate(data)
    except ValidationError as error:
        return "error", [(e["type"], e["loc"], e["msg"]) for e in error.errors()]
    return "settings", (result, result.model_fields_set)


@settings(max_examples=150, deadline=None)
@given(layers())
def test_property_sections_validate_as_the_whole_model(data: dict[str, Any]) -> None:
    """The same settings (and the same keys set), or the same errors at the same keys."""
    whole = _outcome(OllmSettings.model_validate, data)
    by_section = _outcome(OllmSettings.validate_sections, data)
    assert by_section == whole


@settings(max_examples=100, deadline=None)
@given(layers())
def test_property_changed_sections_give_the_settings_back(data: dict[str, Any]) -> None:
    """What a client sends in its hello is validated by the service into the
    client's very settings."""
    try:
        loaded = OllmSettings.validate_sections(data)
    except ValidationError:
        return
    sent = loaded.changed_sections()
    assert OllmSettings.model_validate(sent) == loaded
    set_here = {key for key in data if key in OllmSettings.model_fields}
    assert set(sent) <= set_here | {"services", "snapshots"}  # + the folders: below


def test_defaults_change_no_section_but_the_folders_taken_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLM_HOME", str(tmp_path / "client-home"))
    sent = OllmSettings.defaults().changed_sections()
    assert sent == {
        "services": {"session": {"dataDir": str(tmp_path / "client-home" / "sessions")}},
        "snapshots": {"dataDir": str(tmp_path / "client-home" / "context-snapshots")},
    }
    assert OllmSettings.validate_sections({}) == OllmSettings.defaults()


def test_a_service_of_another_home_validates_the_client_s_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service validates a hello's sections in its own environment: a folder left
    at its default must still be the client's (the chat's ``changed:`` line read the
    checkpoints of the client's home, which the service had kept in its own)."""
    monkeypatch.setenv("OLLM_HOME", str(tmp_path / "client-home"))
    client = OllmSettings.validate_sections({"services": {"session": {"maxSessions": 5}}})
    sent = client.changed_sections()
    monkeypatch.setenv("OLLM_HOME", str(tmp_path / "service-home"))
    served = OllmSettings.model_validate(sent)
    assert served == client
    assert served.snapshots.data_dir == tmp_path / "client-home" / "context-snapshots"
    assert served.services.session.data_dir == tmp_path / "client-home" / "sessions"


@pytest.mark.parametrize(
    "flags",
    [
        {"model": "qwen3"},
        {"provider": "ollama", "model": "qwen3"},
        {"runtime": "inprocess"},
        {"ray_address": "127.0.0.1:6379"},
        {"ray_address": "127.0.0.1:6379", "runtime": "inprocess"},
        {"no_loop_detection": True},
    ],
)
@pytest.mark.parametrize(
    "layer",
    [{}, {"runtime": {"kind": "inprocess"}}, {"provider": {"name": "openai", "model": "gpt"}}],
)
def test_flags_apply_as_a_whole_validation_does(
    flags: dict[str, Any], layer: dict[str, Any]
) -> None:
    """``apply_overrides`` gives what changing the whole dump and validating it gave."""
    loaded = OllmSettings.validate_sections(layer)
    expected: dict[str, Any] = loaded.model_dump(by_alias=True)
    if "model" in flags:
        expected["provider"]["model"] = flags["model"]
    if "provider" in flags:
        expected["provider"]["name"] = flags["provider"]
    if "runtime" in flags:
        expected["runtime"]["kind"] = flags["runtime"]
    if "ray_address" in flags:
        expected["runtime"]["rayAddress"] = flags["ray_address"]
        if expected["runtime"]["kind"] == "inprocess":
            expected["runtime"]["kind"] = "service"
    if flags.get("no_loop_detection"):
        expected["services"]["loopDetection"]["enabled"] = False
    assert apply_overrides(loaded, **flags) == OllmSettings.model_validate(expected)


def test_a_bad_value_is_named_with_its_source(tmp_path: Path) -> None:
    """The loader's error names the file, the key and what is allowed, as before."""
    user = tmp_path / "config.yaml"
    user.write_text("provider:\n  name: ollama\n  ollama:\n    timeout: -3\n")
    with pytest.raises(Exception) as caught:
        load_settings(tmp_path, env={}, user_file=user)
    message = str(caught.value)
    assert f"{user}: provider.ollama.timeout: -3:" in message


def test_a_run_with_a_variable_set_builds_that_section_alone(tmp_path: Path) -> None:
    """In a fresh process, as ``ollm run -p`` with ``OLLM_MODEL`` set loads its config:
    the provider section is validated, the whole model's validator is never built
    (nor by the flags, nor by the hello's settings)."""
    code = (
        "from pathlib import Path\n"
        "from ollm_cli.cli.overrides import apply_overrides\n"
        "from ollm_cli.config.loader import load_settings\n"
        "from ollm_cli.config import settings as s\n"
        "loaded = load_settings(Path.cwd())\n"
        "changed = apply_overrides(loaded.settings, model='other').changed_sections()\n"
        "print(loaded.settings.provider.model, changed['provider']['model'],"
        " s.ProviderSettings.__pydantic_complete__, s.OllmSettings.__pydantic_complete__,"
        " s.RuntimeSettings.__pydantic_complete__)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
    env.update(OLLM_HOME=str(tmp_path / "home"), OLLM_MODEL="qwen3")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["qwen3", "other", "True", "False", "False"]


def test_no_section_defaults_to_a_builtin_factory() -> None:
    """A builtin as ``default_factory`` (``list``) makes pydantic parse its signature
    from text each time it makes the default (tokenize's regex compiled at first):
    the config's lists default to ``[]``, each instance still getting its own."""
    models: list[type[BaseModel]] = [OllmSettings, *_sections(OllmSettings)]
    builtins = [
        f"{model.__name__}.{name}"
        for model in models
        for name, info in model.model_fields.items()
        if type(info.default_factory) is type
    ]
    assert builtins == []
    first, second = OllmSettings.defaults(), OllmSettings.defaults()
    first.tools.sandbox.deny_read.append("~/.secret")
    assert second.tools.sandbox.deny_read == []


def _sections(model: type[BaseModel]) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for info in model.model_fields.values():
        for kind in (info.annotation, *getattr(info.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel) and kind not in found:
                found += [kind, *_sections(kind)]
    return found
