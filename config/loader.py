"""Loading the configuration: defaults, then ``~/.ollm/config.yaml``, then the
workspace's ``.ollm/config.yaml``, then ``OLLM_*`` environment variables.

Each layer is a nested mapping of camelCase keys; later layers win key by key.
The loader remembers which layer set each value so that ``ollm config show``
can say where it came from, and so that a validation error can name the file.

Environment variables address a key by its path, segments joined by ``__``
(case and underscores inside a segment do not matter)::

    OLLM_SERVICES__COMPRESSION__THRESHOLD=0.7
    OLLM_SERVICES__LOOP_DETECTION__MAX_TURNS=20
    OLLM_PROVIDER__NAME=ollama

plus three short forms: ``OLLM_MODEL``, ``OLLM_PROVIDER`` and ``OLLM_OLLAMA_HOST``.
Values are read as YAML scalars (``true``, ``0.7``, ``[a, b]``).

Last, the variables other tools share (``OLLAMA_HOST``, ``OPENAI_BASE_URL``,
``OTEL_EXPORTER_OTLP_ENDPOINT``; see ``config/standard_env.py``) fill their key
when no layer set it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ollm_cli.config.paths import user_config_path, workspace_config_path
from ollm_cli.config.settings import OllmSettings
from ollm_cli.config.standard_env import standard_env_values
from ollm_cli.pipeline.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_SOURCE = "default"
ENV_PREFIX = "OLLM_"
_NOT_CONFIG = {"OLLM_HOME", "OLLM_LOG_LEVEL", "OLLM_NO_RAY"}
_SHORT_FORMS = {
    "OLLM_MODEL": ("provider", "model"),
    "OLLM_PROVIDER": ("provider", "name"),
    "OLLM_OLLAMA_HOST": ("provider", "ollama", "host"),
}


@dataclass
class LoadedSettings:
    """The effective settings and, for each dotted key, the layer that set it."""

    settings: OllmSettings
    sources: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def source_of(self, dotted_key: str) -> str:
        """Where ``dotted_key`` (camelCase, e.g. ``services.compression.threshold``) came from."""
        best = DEFAULT_SOURCE
        for key, source in self.sources.items():
            if dotted_key == key or dotted_key.startswith(key + "."):
                best = source
        return best


def _redact(text: str) -> str:
    from ollm_cli.pipeline.environment._redaction import redact

    return redact(text)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}",
            hint="check the file's permissions, or move it away to use the defaults",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(
            f"config file {path} is not valid YAML{where}: {problem}",
            hint="fix the syntax there; `ollm config path` lists the files read",
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys (like `services:`), "
            f"not a {type(data).__name__}",
            hint="see `ollm config show` for the shape of the file",
        )
    return data


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def _resolve_env_path(segments: list[str]) -> tuple[str, ...] | None:
    """Map ``["SERVICES", "LOOP_DETECTION", "MAX_TURNS"]`` to camelCase keys."""
    model: type[BaseModel] | None = OllmSettings
    keys: list[str] = []
    for segment in segments:
        if model is None:
            return None
        match = None
        for name, info in model.model_fields.items():
            alias = info.alias or name
            if _norm(alias) == _norm(segment):
                match = (alias, info.annotation)
                break
        if match is None:
            return None
        keys.append(match[0])
        annotation = match[1]
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return tuple(keys)


def _env_layer(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in _NOT_CONFIG:
            continue
        path = _SHORT_FORMS.get(name) or _resolve_env_path(name[len(ENV_PREFIX) :].split("__"))
        if path is None:
            logger.warning("ignoring environment variable %s: it names no config key", name)
            continue
        raw = env[name]
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            value = raw
        if isinstance(value, dict):
            value = raw
        cursor = layer
        for key in path[:-1]:
            cursor = cursor.setdefault(key, {})
        cursor[path[-1]] = value
        sources[".".join(path)] = f"env {name}"
    return layer, sources


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    layer: dict[str, Any] = {path[-1]: value}
    for key in reversed(path[:-1]):
        layer = {key: layer}
    return layer


def _format_validation_error(exc: ValidationError, loaded: LoadedSettings) -> ConfigError:
    lines = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        dotted = ".".join(loc)
        source = loaded.source_of(dotted)
        value = err.get("input")
        shown = _redact(repr(value)) if not isinstance(value, dict) else "a mapping"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key (check its spelling; keys are camelCase)"
        elif err["type"] == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            message = f"must be one of {expected}"
        lines.append(f"{source}: {dotted}: {shown}: {message}")
    return ConfigError(
        "invalid configuration:\n  " + "\n  ".join(lines),
        hint="fix the value in the file or variable named above; `ollm config show` prints "
        "what is in effect",
    )


def load_settings(
    workspace: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    user_file: Path | None = None,
) -> LoadedSettings:
    """Load the effective settings, raising :class:`ConfigError` for a bad layer."""
    environ = os.environ if env is None else env
    user = user_file or user_config_path()
    workspace_file = workspace_config_path(workspace)
    loaded = LoadedSettings(settings=OllmSettings(), files=[user, workspace_file])
    merged: dict[str, Any] = {}
    seen: set[Path] = set()
    for path in (user, workspace_file):
        resolved = path.resolve() if path.exists() else path
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        layer = _read_yaml(path)
        _merge(merged, layer)
        for dotted in _flatten(layer):
            loaded.sources[dotted] = str(path)
    env_layer, env_sources = _env_layer(environ)
    _merge(merged, env_layer)
    loaded.sources.update(env_sources)
    for name, key, value in standard_env_values(environ):
        if loaded.source_of(".".join(key)) == DEFAULT_SOURCE:
            _merge(merged, _nested(key, value))
            loaded.sources[".".join(key)] = f"env {name}"
    try:
        loaded.settings = OllmSettings.model_validate(merged)
    except ValidationError as exc:
        raise _format_validation_error(exc, loaded) from None
    return loaded


def effective_items(loaded: LoadedSettings) -> list[tuple[str, Any, str]]:
    """Every leaf of the effective settings as ``(dotted key, value, source)``."""
    data = loaded.settings.model_dump(mode="json", by_alias=True)
    return [(key, value, loaded.source_of(key)) for key, value in sorted(_flatten(data).items())]
