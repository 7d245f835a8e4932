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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ollm_cli.base.errors import ConfigError
from ollm_cli.config.layers import ENV_PREFIX, config_variables, has_layers
from ollm_cli.config.paths import check_home, user_config_path, workspace_config_path
from ollm_cli.config.settings import OllmSettings
from ollm_cli.config.standard_env import standard_env_values

if TYPE_CHECKING:  # trust is imported when a workspace has a config file
    from ollm_cli.config.trust import WorkspaceTrust

logger = logging.getLogger(__name__)

DEFAULT_SOURCE = "default"
_SHORT_FORMS = {
    "OLLM_MODEL": ("provider", "model"),
    "OLLM_PROVIDER": ("provider", "name"),
    "OLLM_OLLAMA_HOST": ("provider", "ollama", "host"),
}


@dataclass
class LoadedSettings:
    """The effective settings and, for each dotted key, the layer that set it."""

    settings: OllmSettings = field(init=False)
    """Set by :func:`load_settings` once its layers are read (the defaults are built
    only when no layer replaces them)."""
    sources: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    workspace_trusted: bool = True
    ignored: list[str] = field(default_factory=list)
    """Keys of the workspace file left out because the folder is not trusted."""
    trust: WorkspaceTrust | None = None
    """Why the workspace file was (not) trusted; ``None`` without a workspace file."""
    problems: list[ConfigError] = field(default_factory=list)
    """What was wrong, when loaded with ``lenient=True`` (empty otherwise)."""
    replaced: dict[str, str] = field(default_factory=dict)
    """Lenient loading: each dotted key left at its default, and who set the bad value."""

    def source_of(self, dotted_key: str) -> str:
        """Where ``dotted_key`` (camelCase, e.g. ``services.compression.threshold``) came from."""
        best = DEFAULT_SOURCE
        for key, source in self.sources.items():
            if dotted_key == key or dotted_key.startswith(key + "."):
                best = source
        for key, source in self.replaced.items():
            if dotted_key == key or dotted_key.startswith(key + "."):
                return f"default (the value in {source} is invalid)"
        if best == DEFAULT_SOURCE:  # a mapping (`services.compresion:`): who set keys in it
            below = [s for key, s in self.sources.items() if key.startswith(dotted_key + ".")]
            best = below[-1] if below else best
        return best


def _redact(text: str) -> str:
    from ollm_cli.config.masking import mask_secrets

    return mask_secrets(text)


MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused (they are a few hundred bytes)."""


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}",
            hint="check the file's permissions, or move it away to use the defaults",
        ) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_CONFIG_BYTES // 1024} KiB",
            hint="a config file holds a few settings; check that this is the right file",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not valid UTF-8 (bad byte at offset {exc.start})",
            hint="save it as UTF-8 text, or move it away to use the defaults",
        ) from None
    from ollm_cli.config._yaml import YamlLimit, YamlSyntax, parse_yaml

    try:
        data = parse_yaml(text)
    except YamlLimit as exc:
        raise ConfigError(
            f"config file {path} is refused: {exc}",
            hint="a config file is a few levels of keys; write it out without deep "
            "nesting or repeated aliases",
        ) from None
    except YamlSyntax as exc:
        raise ConfigError(
            f"config file {path} is not valid YAML{exc.where}: {exc.problem}",
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


MAX_ENV_VALUE = 64 * 1024


def _check_env_text(name: str, raw: str) -> None:
    """An ``OLLM_*`` value must be UTF-8 text of a sane length."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"environment variable {name} is not valid UTF-8",
            hint=f"set {name} to UTF-8 text, or unset it",
        ) from None
    if len(raw) > MAX_ENV_VALUE:
        raise ConfigError(
            f"environment variable {name} is longer than {MAX_ENV_VALUE // 1024} KiB",
            hint=f"check the value of {name}",
        )


_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9._/@+:-]*")
_YAML_WORDS = frozenset(
    form
    for word in ("yes", "no", "true", "false", "on", "off", "null", "y", "n")
    for form in (word, word.capitalize(), word.upper())
)


def is_plain_word(raw: str) -> bool:
    """Whether YAML reads ``raw`` as this very string (``ollama``, ``llama3.2:latest``,
    ``http://127.0.0.1:11434``): a letter first, no space, no quote or flow or comment
    character, no trailing ``:``, and not a word YAML reads as a boolean or null.
    Such a value needs no parser, and PyYAML is not imported for it."""
    return (
        _PLAIN_WORD.fullmatch(raw) is not None and not raw.endswith(":") and raw not in _YAML_WORDS
    )


def _env_value(name: str, raw: str) -> Any:
    """The value of variable ``name``: YAML (``[a, b]``, ``0.7``, ``true``), or the text
    itself when it is not (a plain word, a string YAML cannot parse, a mapping)."""
    if is_plain_word(raw):
        return raw
    from ollm_cli.config._yaml import YamlLimit, YamlSyntax, parse_yaml

    try:
        value = parse_yaml(raw) if raw.strip() else raw
    except YamlLimit as exc:
        raise ConfigError(
            f"environment variable {name} is refused: {exc}",
            hint=f"give {name} a plain value (a number, a word, a short [list])",
        ) from None
    except YamlSyntax:
        value = raw
    return raw if isinstance(value, dict) else value


def _env_layer(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in config_variables(env):
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                "an OLLM_ environment variable has a name that is not valid UTF-8",
                hint="unset it (`env | grep -a ^OLLM_` lists them)",
            ) from None
        path = _SHORT_FORMS.get(name) or _resolve_env_path(name[len(ENV_PREFIX) :].split("__"))
        if path is None:
            logger.warning("ignoring environment variable %s: it names no config key", name)
            continue
        raw = env[name]
        _check_env_text(name, raw)
        value = _env_value(name, raw)
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
        message = _redact(err["msg"])  # a parser's message may repeat the value
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


_APPROVAL_RANK = {"allow": 0, "ask": 1, "deny": 2}


def _tightens(dotted: str, value: Any, base: Mapping[str, Any]) -> bool:
    """Whether setting ``dotted`` to ``value`` only makes things stricter than ``base``."""
    from ollm_cli.config.trust import lower_only

    current = base.get(dotted)
    if dotted.startswith("tools.approval.") or dotted == "tools.defaultApproval":
        if current is None and dotted.startswith("tools.approval."):
            current = base.get("tools.defaultApproval", "ask")
        return (
            isinstance(value, str)
            and value in _APPROVAL_RANK
            and _APPROVAL_RANK[value] >= _APPROVAL_RANK.get(str(current), 2)
        )
    if dotted in ("tools.sandbox.network", "tools.sandbox.allowUnsandboxed"):
        return value is False
    if dotted in ("services.session.redactSecrets", "services.loopDetection.enabled"):
        return value is True
    if lower_only(dotted) and isinstance(current, int | float):
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= current
        )
    return False


def _canonical_flat(layer: Mapping[str, Any]) -> dict[str, Any]:
    """The layer's leaves by dotted key, each spelt as the file's camelCase key (a key
    that names no setting is kept as written, for validation to name)."""
    from ollm_cli.config.trust import canonical_key

    return {canonical_key(k) or k: v for k, v in _flatten(layer).items()}


def _untrusted_layer(
    layer: dict[str, Any], base: Mapping[str, Any], *, trusted: bool
) -> tuple[dict[str, Any], list[str]]:
    """The workspace ``layer`` without the keys it may not set, and those keys (a hook's
    ``sandbox`` among them, trusted or not: ``hooks[0].sandbox``)."""
    from ollm_cli.config.trust import restricted, workspace_hooks

    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for dotted, value in _canonical_flat(layer).items():
        if restricted(dotted, trusted=trusted) and (trusted or not _tightens(dotted, value, base)):
            ignored.append(dotted)
            continue
        if dotted == "hooks":
            value, user_only = workspace_hooks(value)
            ignored.extend(user_only)
        _merge(kept, _nested(tuple(dotted.split(".")), value))
    return kept, ignored


def restricted_part(layer: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a workspace ``layer`` an untrusted workspace may not set (whatever
    their value), by canonical dotted key: what trusting the folder pins."""
    from ollm_cli.config.trust import restricted

    return {k: v for k, v in _canonical_flat(layer).items() if restricted(k, trusted=False)}


def workspace_restricted_part(workspace: Path) -> dict[str, Any]:
    """:func:`restricted_part` of ``workspace``'s ``.ollm/config.yaml`` as it is now
    (empty without a file)."""
    path = workspace_config_path(workspace)
    return restricted_part(_read_yaml(path)) if path.is_file() else {}


def load_settings(
    workspace: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    user_file: Path | None = None,
    trusted: bool | None = None,
    lenient: bool = False,
) -> LoadedSettings:
    """Load the effective settings, raising :class:`ConfigError` for a bad layer.

    ``trusted`` says whether the workspace's own file may set the keys outside
    :data:`ollm_cli.config.trust.ALLOWED_KEYS`; by default the trusted folders list
    decides (the folder trusted with exactly the file's restricted part), or
    ``OLLM_TRUST_WORKSPACE=1`` for one run.

    The OLLM home is checked first (:func:`~ollm_cli.config.paths.check_home`): one
    that another user owns, or others may write, raises
    :class:`~ollm_cli.base.errors.UnsafeHomeError`, lenient or not.

    ``lenient`` (for the commands that help repair a config: ``config show``,
    ``service stop``, ``sessions doctor``) raises nothing else: a file or the ``OLLM_*``
    variables that cannot be read are left out, an invalid value is left at its
    default, and each error is kept in :attr:`LoadedSettings.problems`.
    """
    check_home()  # what the home holds is obeyed as the user's: refused when not theirs
    environ = os.environ if env is None else env
    user = user_file or user_config_path()
    workspace_file = workspace_config_path(workspace)
    loaded = LoadedSettings(files=[user, workspace_file])
    if not has_layers(workspace, environ, user_file=user):  # every value at its default
        loaded.settings = OllmSettings.defaults()
        return loaded
    merged: dict[str, Any] = {}
    seen: set[Path] = set()
    for path in (user, workspace_file):
        resolved = path.resolve() if path.exists() else path
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        try:
            layer = _read_yaml(path)
        except ConfigError as exc:
            if not lenient:
                raise
            loaded.problems.append(exc)
            continue
        if path is workspace_file:
            from ollm_cli.config.trust import WorkspaceTrust, workspace_trust

            folder = workspace or Path.cwd()
            if trusted is None:
                verdict = workspace_trust(folder, restricted_part(layer), env=environ)
            else:
                verdict = WorkspaceTrust("trusted" if trusted else "untrusted")
            base = _flatten(OllmSettings.defaults().model_dump(mode="json", by_alias=True))
            base.update(_flatten(merged))
            layer, loaded.ignored = _untrusted_layer(layer, base, trusted=verdict.trusted)
            loaded.workspace_trusted = verdict.trusted
            loaded.trust = verdict
            if loaded.ignored:
                _warn_ignored(workspace_file, folder, loaded.ignored, verdict)
        _merge(merged, layer)
        for dotted in _flatten(layer):
            loaded.sources[dotted] = str(path)
    try:
        env_layer, env_sources = _env_layer(environ)
    except ConfigError as exc:
        if not lenient:
            raise
        loaded.problems.append(exc)
        env_layer, env_sources = {}, {}
    _merge(merged, env_layer)
    loaded.sources.update(env_sources)
    for name, key, value in standard_env_values(environ):
        if loaded.source_of(".".join(key)) == DEFAULT_SOURCE:
            _merge(merged, _nested(key, value))
            loaded.sources[".".join(key)] = f"env {name}"
    if not merged:  # no file, no variable: nothing to validate (see ConfigModel)
        loaded.settings = OllmSettings.defaults()
        return loaded
    try:  # only the sections set are validated: the rest are defaults
        loaded.settings = OllmSettings.validate_sections(merged)
    except ValidationError as exc:
        error = _format_validation_error(exc, loaded)
        if not lenient:
            raise error from None
        loaded.problems.append(error)
        loaded.settings = _valid_part(merged, exc, loaded)
    return loaded


def _valid_part(
    merged: dict[str, Any], exc: ValidationError, loaded: LoadedSettings
) -> OllmSettings:
    """The settings of ``merged`` with every value ``exc`` refuses left at its default."""
    for _ in range(8):  # a dropped key can only reveal errors below it; a few rounds suffice
        for err in exc.errors():
            cursor: Any = merged
            path: list[str] = []
            for part in err["loc"]:
                if not isinstance(cursor, dict) or str(part) not in cursor:
                    break
                path.append(str(part))
                parent, cursor = cursor, cursor[str(part)]
            if not path:
                continue
            parent.pop(path[-1], None)
            dotted = ".".join(path)
            loaded.replaced.setdefault(dotted, loaded.source_of(dotted))
        try:
            return OllmSettings.model_validate(merged)
        except ValidationError as again:
            exc = again
    return OllmSettings.defaults()


def _warn_ignored(path: Path, workspace: Path, keys: list[str], trust: WorkspaceTrust) -> None:
    """One line naming the ignored keys and what to do about them."""
    folder = workspace.resolve()
    if trust.trusted:
        logger.warning(
            "%s: ignored %s: only your own config file (%s) may set them",
            path,
            ", ".join(keys),
            user_config_path(),
        )
    elif trust.state == "changed":
        logger.warning(
            "%s changed since you trusted this folder (%s), so its restricted keys are "
            "ignored (%s). Review the change and trust it again with `ollm trust %s`",
            path,
            ", ".join(trust.changed),
            ", ".join(keys),
            folder,
        )
    elif trust.state == "unpinned":
        logger.warning(
            "%s: this folder was trusted before OLLM pinned trust to the file's content, so "
            "%s are ignored. Review them and trust the folder again with `ollm trust %s`",
            path,
            ", ".join(keys),
            folder,
        )
    else:
        logger.warning(
            "%s: this folder is not trusted, so its config may not set %s (ignored). If you "
            "trust this repository, run `ollm trust %s` (or pass --trust-workspace for one "
            "run)",
            path,
            ", ".join(keys),
            folder,
        )


def effective_items(loaded: LoadedSettings) -> list[tuple[str, Any, str]]:
    """Every leaf of the effective settings as ``(dotted key, value, source)``."""
    data = loaded.settings.model_dump(mode="json", by_alias=True)
    return [(key, value, loaded.source_of(key)) for key, value in sorted(_flatten(data).items())]
