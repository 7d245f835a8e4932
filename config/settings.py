"""The configuration model: the whole YAML schema of spec 001 plus 003's snapshots.

Keys in files are the spec's camelCase (``services.loopDetection.maxTurns``);
attributes are snake_case. Every model forbids unknown keys so that a typo is
an error that names the key instead of a setting silently ignored.

Example::

    settings = OllmSettings()                      # all defaults
    settings.services.compression.threshold        # 0.8
"""

# No `from __future__ import annotations` here: pydantic evaluates a string annotation
# when it creates the class, a quarter of the time it takes to create these models,
# which every command does (a warm `ollm run -p` among them).
import fnmatch
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from ollm_cli.config.discovery_defaults import DEFAULT_BUILTIN_IGNORES, FILE_DISCOVERY_DEFAULTS
from ollm_cli.config.paths import ollm_home

logger = logging.getLogger(__name__)

DEFAULT_ALLOW_LIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "TERM",
    "LANG",
    "LC_*",
)
DEFAULT_DENY_PATTERNS: tuple[str, ...] = (
    "*_KEY",
    "*_SECRET",
    "*_TOKEN",
    "*_PASSWORD",
    "*_CREDENTIAL",
    "AWS_*",
    "GITHUB_*",
)

_MAX_TOKENS = 10_000_000
"""No model has a window or an answer longer than this many tokens."""

_ENV_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")


_Model = TypeVar("_Model", bound="ConfigModel")


class ConfigModel(BaseModel):
    """Base of every config section: camelCase keys, unknown keys refused.

    A section's validator is built the first time something is validated against
    it, not at import: defaults are valid by construction (pydantic never
    validates them), so a user without config files, whose settings are all
    defaults (:meth:`defaults`), pays for no validator at all, and one with a
    config file pays for it once, when it is read (for the sections it sets:
    :meth:`OllmSettings.validate_sections`).

    A list defaults to ``[]`` (pydantic copies it for each instance), never to
    ``default_factory=list``: pydantic reads a factory's signature each time it
    calls it, and a builtin's is parsed from text (tokenize's regex compiled, at
    first: milliseconds of every command).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
        allow_inf_nan=False,
        defer_build=True,
    )

    @classmethod
    def defaults(cls: type[_Model]) -> _Model:
        """Every value at its default (what validating ``{}`` gives), without building
        a validator: the default factories of the sections are ``defaults`` too."""
        # the pydantic mypy plugin types model_construct with the class that declares it
        return cast(_Model, cls.model_construct())


def _valid_env_pattern(pattern: str) -> bool:
    if not pattern or not _ENV_PATTERN.match(pattern):
        return False
    if pattern.count("[") != pattern.count("]"):
        return False
    try:
        re.compile(fnmatch.translate(pattern))
    except re.error:
        return False
    return True


def _valid_ignore_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a gitignore line that can match, by the parser discovery
    matches with (what it accepts is what works): not an unclosed ``[``, a trailing
    backslash, an unknown ``[:class:]``, a blank or a comment."""
    # Imported when a pattern is set: most runs never pay for the parser.
    from ollm_cli.config.ignore_syntax import NeverMatchesError, parse_rule

    try:
        return parse_rule(pattern) is not None
    except NeverMatchesError:
        return False


def keep_valid_patterns(
    patterns: list[str], defaults: tuple[str, ...], key: str, check: Any
) -> list[str]:
    """Requirement 10.5: an invalid pattern is a warning and the defaults stand."""
    bad = [p for p in patterns if not check(p)]
    if bad:
        logger.warning(
            "config: %s has invalid pattern(s) %s; using the default list instead",
            key,
            ", ".join(repr(p) for p in bad),
        )
        return list(defaults)
    return patterns


def check_host_url(value: str) -> str:
    """``value`` if it is an http(s) URL or a bare ``host[:port]``; else ``ValueError``.

    The message never repeats a password the URL may hold.
    """
    text = value.strip()
    if not text or any(ord(c) < 0x20 or c.isspace() or ord(c) == 0x7F for c in text):
        raise ValueError("must be a URL such as http://127.0.0.1:11434 (no spaces)")
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
    except ValueError:  # its message repeats the address, password included
        raise ValueError("is not a URL (expected http://HOST:PORT)") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"must be an http:// or https:// URL, not {parts.scheme}://")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has a port that is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ValueError("names no host (expected http://HOST:PORT)")
    del port
    return text


class SessionSettings(ConfigModel):
    """``services.session``: where and how sessions are recorded."""

    data_dir: Path = Field(default_factory=lambda: ollm_home() / "sessions")
    max_sessions: Annotated[int, Field(ge=0, le=1_000_000)] = 100
    auto_save: bool = True
    """Bring a session's file up to date after its turns (off: only when it is closed).
    Either way every record is durable in the journal the moment it is acknowledged."""
    save_delay_ms: Annotated[float, Field(ge=0, le=60_000)] = 200.0
    """How long after a turn ends its file is rewritten; turn ends within that time
    share one rewrite (0: at once, every turn)."""
    redact_secrets: bool = True
    group_commit_ms: Annotated[float, Field(ge=0, le=1000)] = 2.0
    trash_days: Annotated[int, Field(ge=0, le=3650)] = 7
    """How many days sessions removed by ``maxSessions`` (or deleted) stay in the
    trash folder, from which ``ollm sessions trash restore ID`` brings them back
    (0: emptied at the next cleanup)."""
    rescue_dirs: list[Path] = []
    """Where records that could not be written to ``dataDir`` (a full disk) are
    kept when a command ends, tried before the defaults ($XDG_RUNTIME_DIR when it is
    private, ``OLLM_HOME/rescue``, ``~/.cache/ollm/rescue``); a folder on another
    filesystem wins, and only a folder of the user's that no one else may enter is
    used. The next command that can write to ``dataDir`` replays them (only files of
    the user's with the home's keyed digest)."""
    stream_record_ms: Annotated[float, Field(ge=20, le=5000)] = 250.0
    """How often the part of an answer shown so far is recorded while it streams."""
    import_max_message_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = 1 << 20
    """How much text (UTF-8 bytes) one message of an imported session may hold: the
    rest of a larger message is left out on import, a placeholder saying how much."""

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


class CompressionSettings(ConfigModel):
    """``services.compression``: keeping long conversations inside the window."""

    enabled: bool = True
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.8
    strategy: Literal["summarize", "truncate", "hybrid"] = "hybrid"
    preserve_recent: Annotated[int, Field(ge=0, le=_MAX_TOKENS)] = 4096
    summary_max_tokens: Annotated[int, Field(ge=16, le=_MAX_TOKENS)] = 1024
    response_reserve: Annotated[int, Field(ge=0, le=_MAX_TOKENS)] = 1024
    max_failures: Annotated[int, Field(ge=1, le=1000)] = 3
    finish_on_exit_s: Annotated[float, Field(ge=0, le=3600)] = 30.0
    """How long a command waits at exit for a compression still running (0: not at all)."""


class LoopDetectionSettings(ConfigModel):
    """``services.loopDetection``: catching runaway tool calls and output."""

    enabled: bool = True
    max_turns: Annotated[int, Field(ge=1, le=100_000)] = 50
    repeat_threshold: Annotated[int, Field(ge=2, le=1000)] = 3
    output_similarity: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_cycle_period: Annotated[int, Field(ge=1, le=10)] = 5
    on_detect: Literal["nudge", "stop"] = "nudge"
    poll_threshold: Annotated[int, Field(ge=2, le=100)] = 10
    """Polling (the same call while its result says the work is still in progress,
    or with a wait between calls) is work: the unchanged poll is nudged at this
    count, whatever ``onDetect`` says, and stopped at twice this count."""
    poll_interval_s: Annotated[float, Field(gt=0, le=86_400)] = 20.0
    """Identical calls at least this many seconds apart are a wait between polls."""


class FileDiscoverySettings(ConfigModel):
    """``services.fileDiscovery``: which project files the model sees."""

    max_depth: Annotated[int, Field(ge=0, le=1000)] = FILE_DISCOVERY_DEFAULTS.max_depth
    """Deepest level listed (0: the root's own files). Deep enough for monorepos
    (sveltejs/kit's tracked files go 15 deep); a scan cut by it says so."""
    follow_symlinks: bool = FILE_DISCOVERY_DEFAULTS.follow_symlinks
    builtin_ignores: list[str] = Field(
        default_factory=lambda: list(FILE_DISCOVERY_DEFAULTS.builtin_ignores)
    )
    max_files: Annotated[int, Field(ge=1, le=100_000_000)] = FILE_DISCOVERY_DEFAULTS.max_files
    scan_time_s: Annotated[float, Field(gt=0, le=3600)] = FILE_DISCOVERY_DEFAULTS.scan_time_s
    """Longest a scan may walk; a scan cut by it names the directories left out."""

    @field_validator("builtin_ignores", mode="after")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return keep_valid_patterns(
            value,
            DEFAULT_BUILTIN_IGNORES,
            "services.fileDiscovery.builtinIgnores",
            _valid_ignore_pattern,
        )


class EnvironmentSettings(ConfigModel):
    """``services.environment``: what tools may see of the environment."""

    mode: Literal["default", "allowOnly"] = "default"
    allow_list: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOW_LIST))
    deny_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY_PATTERNS))

    @field_validator("allow_list", mode="after")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        return keep_valid_patterns(
            value, DEFAULT_ALLOW_LIST, "services.environment.allowList", _valid_env_pattern
        )

    @field_validator("deny_patterns", mode="after")
    @classmethod
    def _deny(cls, value: list[str]) -> list[str]:
        return keep_valid_patterns(
            value, DEFAULT_DENY_PATTERNS, "services.environment.denyPatterns", _valid_env_pattern
        )


class ContextSettings(ConfigModel):
    """``services.context``: the system-prompt additions of the ContextManager."""

    token_budget: Annotated[int, Field(ge=0, le=_MAX_TOKENS)] = 2048
    load_project_files: bool = True


class ServicesSettings(ConfigModel):
    """``services``: one section per service of spec 001."""

    session: SessionSettings = Field(default_factory=SessionSettings.defaults)
    compression: CompressionSettings = Field(default_factory=CompressionSettings.defaults)
    loop_detection: LoopDetectionSettings = Field(default_factory=LoopDetectionSettings.defaults)
    file_discovery: FileDiscoverySettings = Field(default_factory=FileDiscoverySettings.defaults)
    environment: EnvironmentSettings = Field(default_factory=EnvironmentSettings.defaults)
    context: ContextSettings = Field(default_factory=ContextSettings.defaults)


class SnapshotSettings(ConfigModel):
    """``snapshots`` (spec 003): rollback points of the active context."""

    enabled: bool = True
    max_count: Annotated[int, Field(ge=1, le=10_000)] = 5
    auto_create: bool = True
    auto_threshold: Annotated[float, Field(gt=0, le=1)] = 0.85
    data_dir: Path = Field(default_factory=lambda: ollm_home() / "context-snapshots")

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


class CheckpointSettings(ConfigModel):
    """``checkpoints``: the previous state of files tools change, kept so that a
    rewind (``ollm sessions rewind``, ``/rewind``) can put the workspace back."""

    enabled: bool = True
    max_mb: Annotated[int, Field(ge=1, le=1_000_000)] = 512
    """Per session: once its checkpoints take this much on disk (allocated blocks of
    the kept contents and of the log), further changes are not kept and a rewind past
    them says so."""
    max_file_mb: Annotated[int, Field(ge=0, le=100_000)] = 16
    """Files larger than this are not copied before a shell command; a rewind names
    them instead of restoring them."""
    max_paths_per_call: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    """Per tool call: the changed paths recorded (the shallowest first); a rewind past
    the call says how many more it changed and leaves them as they are."""


class OllamaSettings(ConfigModel):
    """``provider.ollama``: where the Ollama server answers."""

    host: str = "http://127.0.0.1:11434"

    @field_validator("host", mode="after")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_host_url(value)

    timeout: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    default_context_window: Annotated[int, Field(ge=512, le=_MAX_TOKENS)] = 4096
    # The most of a model's window OLLM asks Ollama to allocate (``num_ctx``):
    # a 128k window would cost gigabytes of KV cache on a laptop.
    max_context_window: Annotated[int, Field(ge=512, le=_MAX_TOKENS)] = 8192


class EmbeddedSettings(ConfigModel):
    """``provider.embedded``: llama.cpp in-process on a GGUF file."""

    model_path: Path | None = None
    context_window: Annotated[int, Field(ge=256, le=_MAX_TOKENS)] = 2048
    # llama.cpp's threads spin while they wait: more threads than half the cores
    # makes a busy machine crawl (2 threads on 2 cores ran 25-80x slower here)
    threads: Annotated[int, Field(ge=1, le=1024)] = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 2) // 2)
    )
    max_tokens: Annotated[int, Field(ge=1, le=_MAX_TOKENS)] = 256
    seed: Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] = 1234
    # None keeps llama.cpp's default sampling; 0 makes answers repeatable
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None


class SimulatedSettings(ConfigModel):
    """``provider.simulated``: the load-test provider (never the chat default)."""

    latency_ms: Annotated[float, Field(ge=0, le=3_600_000)] = 50.0
    output_tokens: Annotated[int, Field(ge=1, le=_MAX_TOKENS)] = 32
    tool_call_every: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    context_window: Annotated[int, Field(ge=256, le=_MAX_TOKENS)] = 8192
    chunk_ms: Annotated[float, Field(ge=0, le=10_000)] = 0.0
    """Pause between the chunks of an answer (0: all at once), for an answer that
    streams for a while (the soak kills a client in the middle of one)."""


class OpenAISettings(ConfigModel):
    """``provider.openai``: any OpenAI-compatible chat-completions server (llama.cpp's
    ``llama-server``, LM Studio, vLLM, LocalAI, Jan, llamafile).

    The key is read from the variable ``apiKeyEnv`` names, never from this file:
    a secret has no place in a config file, a session or a log."""

    base_url: str = "http://127.0.0.1:8080/v1"
    api_key_env: str = "OPENAI_API_KEY"
    timeout: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    context_window: Annotated[int, Field(ge=256, le=_MAX_TOKENS)] | None = None
    """The context window when the server does not report one."""
    default_context_window: Annotated[int, Field(ge=256, le=_MAX_TOKENS)] = 4096
    max_context_window: Annotated[int, Field(ge=256, le=_MAX_TOKENS)] = 8192

    @field_validator("api_key_env", mode="after")
    @classmethod
    def _variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must be the name of an environment variable, like OPENAI_API_KEY")
        return value


class ProviderSettings(ConfigModel):
    """``provider``: which model answers."""

    name: Literal["auto", "ollama", "openai", "embedded", "simulated"] = "auto"
    model: str | None = None
    thinking: bool = True
    """Ask reasoning models for their reasoning (kept apart from the answer)."""
    ollama: OllamaSettings = Field(default_factory=OllamaSettings.defaults)
    openai: OpenAISettings = Field(default_factory=OpenAISettings.defaults)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings.defaults)
    simulated: SimulatedSettings = Field(default_factory=SimulatedSettings.defaults)


Approval = Literal["allow", "ask", "deny"]


def _default_approval() -> dict[str, Approval]:
    """Reading is allowed; running commands and changing files asks first."""
    return {
        "shell": "ask",
        "write_file": "ask",
        "edit_file": "ask",
        "read_file": "allow",
        "list_files": "allow",
        "glob": "allow",
        "grep": "allow",
    }


class SandboxSettings(ConfigModel):
    """``tools.sandbox``: limits of every tool execution."""

    allow_unsandboxed: bool = False
    network: bool = False
    wall_time_s: Annotated[float, Field(gt=0, le=86_400)] = 60.0
    cpu_time_s: Annotated[int, Field(ge=1, le=86_400)] = 60
    memory_mb: Annotated[int, Field(ge=16, le=1_048_576)] = 1024
    max_output_bytes: Annotated[int, Field(ge=256, le=1024**3)] = 64 * 1024
    max_processes: Annotated[int, Field(ge=1, le=1_000_000)] = 256
    tmp_mb: Annotated[int, Field(ge=1, le=1_048_576)] = 256
    """Size of the sandbox's private ``/tmp`` (a tmpfs; without a size it is half the RAM)."""
    max_file_mb: Annotated[int, Field(ge=1, le=1_048_576)] = 256
    """The largest file a tool may write (``RLIMIT_FSIZE`` in the sandbox, a check in
    ``write_file`` and ``edit_file``)."""
    max_write_mb: Annotated[int, Field(ge=1, le=1_048_576)] = 1024
    """How much one tool command may add to the workspace's file system; past it the
    command is stopped (checked every 50 ms from the file system's free space)."""
    deny_read: list[str] = []
    """More paths hidden from tool commands (``~`` expanded); user-level config only."""
    allow_read: list[str] = []
    """Paths of the default hidden list tool commands may read after all
    (``~/.npmrc``); user-level config only."""


class ToolSettings(ConfigModel):
    """``tools``: approval policy per tool and the sandbox."""

    approval: dict[str, Approval] = Field(default_factory=_default_approval)
    default_approval: Approval = "ask"
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings.defaults)


HookEvent = Literal[
    "session:start",
    "session:end",
    "session:message",
    "tool:call",
    "loop:detected",
    "compression:started",
    "compression:finished",
]
"""The pipeline events a hook can be run on (spec 004's lifecycle hooks)."""


class HookSettings(ConfigModel):
    """One lifecycle hook: ``command`` runs on ``event`` with the event as JSON on stdin,
    in the tool sandbox (``tools.sandbox``) unless ``sandbox`` is false, which only the
    user's own config file (or an ``OLLM_*`` variable) may say."""

    event: HookEvent
    command: str
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 50
    sandbox: bool = True
    """Run in the bubblewrap sandbox tool commands run in; ``false`` runs the command on
    the host, as the user (ignored, with a warning, in a workspace's config)."""


class RuntimeServiceSettings(ConfigModel):
    """``runtime.service``: the long-lived local service (``ollm service``).

    Times are in seconds.
    """

    auto_start: bool = True
    """The first command that needs the service starts it (else: `ollm service start`)."""
    idle_timeout: Annotated[float, Field(gt=0, le=604_800)] = 1800.0
    """The service stops itself after this long with no client and no background work."""
    background_timeout: Annotated[float, Field(gt=0, le=604_800)] = 300.0
    """How long a conversation's background work may run after its client left."""
    stop_timeout: Annotated[float, Field(gt=0, le=604_800)] = 30.0
    """`ollm service stop` waits this long for background work before cutting it short."""
    start_timeout: Annotated[float, Field(gt=0, le=604_800)] = 90.0
    """How long a command waits for a starting service to answer."""


class RuntimeSettings(ConfigModel):
    """``runtime``: where the actors run and how many of them.

    ``kind``: ``service`` (the default) runs conversations in the long-lived local
    service; ``ray`` starts a Ray pipeline for the command alone (or uses the
    cluster at ``rayAddress``); ``inprocess`` keeps everything in the command.
    """

    kind: Literal["service", "ray", "inprocess"] = "service"
    ray_address: str | None = None
    tool_workers: Annotated[int, Field(ge=1, le=1024)] = 2
    compression_actors: Annotated[int, Field(ge=1, le=1024)] = 1
    tool_worker_cpus: Annotated[float, Field(ge=0, le=1024)] = 0.25
    compression_cpus: Annotated[float, Field(ge=0, le=1024)] = 0.25
    max_inflight: Annotated[int, Field(ge=1, le=1_000_000)] = 256
    max_restarts: Annotated[int, Field(ge=0, le=10_000)] = 5
    service: RuntimeServiceSettings = Field(default_factory=RuntimeServiceSettings.defaults)


class TelemetrySettings(ConfigModel):
    """``telemetry``: OpenTelemetry traces and metrics over OTLP, off without an endpoint.

    The standard ``OTEL_*`` variables are honoured (``OTEL_EXPORTER_OTLP_ENDPOINT``
    fills ``otlpEndpoint``; service name, headers, protocol and intervals are read
    by the exporters). Prompts and answers go into spans only with ``logPrompts``."""

    otlp_endpoint: str | None = None
    service_name: str | None = None
    log_prompts: bool = False
    metric_interval_ms: Annotated[float, Field(gt=0, le=86_400_000)] | None = None


class OllmSettings(ConfigModel):
    """The effective configuration of OLLM (defaults < user file < workspace file < env)."""

    services: ServicesSettings = Field(default_factory=ServicesSettings.defaults)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings.defaults)
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings.defaults)
    provider: ProviderSettings = Field(default_factory=ProviderSettings.defaults)
    tools: ToolSettings = Field(default_factory=ToolSettings.defaults)
    hooks: list[HookSettings] = []
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings.defaults)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings.defaults)

    @classmethod
    def validate_sections(cls, data: Mapping[str, Any]) -> "OllmSettings":
        """What :meth:`model_validate` gives for ``data`` (a config's merged layers,
        camelCase), with only the sections ``data`` sets validated, each by its own
        model; the others are at their defaults, valid by construction (see
        :class:`ConfigModel`). The whole model's validator (22 nested models, the
        largest cost of a warm ``ollm run -p`` after its imports) is built only when
        ``data`` is not valid, to raise :meth:`model_validate`'s error: every bad key
        named, as ever. Also when it sets a section that is not a model (``hooks``).

        Example::

            OllmSettings.validate_sections({"provider": {"model": "qwen3"}})
            # == OllmSettings.model_validate(...): only ProviderSettings validated
        """
        names = {info.alias or name: name for name, info in cls.model_fields.items()}
        sections: dict[str, Any] = {}
        for key, value in data.items():
            name = names.get(key, key)
            info = cls.model_fields.get(name)
            model = info.annotation if info is not None else None
            if not (
                isinstance(value, dict)
                and isinstance(model, type)
                and issubclass(model, ConfigModel)
            ):
                return cls.model_validate(data)
            try:
                sections[name] = model.model_validate(value)
            except ValidationError:
                return cls.model_validate(data)  # raises, with the whole model's locations
        return cls.model_construct(**sections)

    def changed_sections(self) -> dict[str, Any]:
        """Each section that differs from its default, as a config file writes it
        (camelCase keys, JSON values): :meth:`model_validate` of it gives these
        settings back. Only the serializers of those sections are built (a warm
        ``ollm run -p`` sends this to the local service in its hello).

        Example::

            OllmSettings.validate_sections({"provider": {"model": "qwen3"}}).changed_sections()
            # {"provider": {"name": "auto", "model": "qwen3", ...}}
        """
        changed: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if value == info.get_default(call_default_factory=True, validated_data={}):
                continue
            changed[info.alias or name] = (
                [item.model_dump(mode="json", by_alias=True) for item in value]
                if isinstance(value, list)
                else value.model_dump(mode="json", by_alias=True)
            )
        for path in _FROM_THE_ENVIRONMENT:  # as this process resolved them
            self._send_resolved(changed, path)
        return changed

    def _send_resolved(self, changed: dict[str, Any], path: tuple[str, ...]) -> None:
        """Put the value at ``path`` (field names) in ``changed`` unless its section is
        there whole: a default taken from the environment (``$OLLM_HOME``) is this
        process's, which a service validating the sections would take from its own."""
        model: Any = self
        keys: list[str] = []
        for name in path:
            keys.append(type(model).model_fields[name].alias or name)
            model = getattr(model, name)
        if keys[0] in changed:
            return
        section = changed.setdefault(keys[0], {})
        for key in keys[1:-1]:
            section = section.setdefault(key, {})
        section[keys[-1]] = str(model)


_FROM_THE_ENVIRONMENT: tuple[tuple[str, ...], ...] = (
    ("services", "session", "data_dir"),
    ("snapshots", "data_dir"),
)
"""The settings whose defaults come from the environment (under ``$OLLM_HOME``): a
client's hello carries them as it resolved them (:meth:`OllmSettings.changed_sections`),
changed or not, so that the service, whose home may be another, records where the
client's own commands read."""
