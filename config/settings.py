"""The configuration model: the whole YAML schema of spec 001 plus 003's snapshots.

Keys in files are the spec's camelCase (``services.loopDetection.maxTurns``);
attributes are snake_case. Every model forbids unknown keys so that a typo is
an error that names the key instead of a setting silently ignored.

Example::

    settings = OllmSettings()                      # all defaults
    settings.services.compression.threshold        # 0.8
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pathspec
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

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
DEFAULT_BUILTIN_IGNORES: tuple[str, ...] = (
    "node_modules",
    ".git",
    "dist",
    "build",
    ".next",
    ".cache",
)

_ENV_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")


class ConfigModel(BaseModel):
    """Base of every config section: camelCase keys, unknown keys refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=True,
    )


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
    if not pattern.strip():
        return False
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except Exception:
        return False
    return True


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


class SessionSettings(ConfigModel):
    """``services.session``: where and how sessions are recorded."""

    data_dir: Path = Field(default_factory=lambda: ollm_home() / "sessions")
    max_sessions: Annotated[int, Field(ge=0)] = 100
    auto_save: bool = True
    """Bring a session's file up to date after its turns (off: only when it is closed).
    Either way every record is durable in the journal the moment it is acknowledged."""
    save_delay_ms: Annotated[float, Field(ge=0, le=60_000)] = 200.0
    """How long after a turn ends its file is rewritten; turn ends within that time
    share one rewrite (0: at once, every turn)."""
    redact_secrets: bool = True
    group_commit_ms: Annotated[float, Field(ge=0, le=1000)] = 2.0

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


class CompressionSettings(ConfigModel):
    """``services.compression``: keeping long conversations inside the window."""

    enabled: bool = True
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.8
    strategy: Literal["summarize", "truncate", "hybrid"] = "hybrid"
    preserve_recent: Annotated[int, Field(ge=0)] = 4096
    summary_max_tokens: Annotated[int, Field(ge=16)] = 1024
    response_reserve: Annotated[int, Field(ge=0)] = 1024
    max_failures: Annotated[int, Field(ge=1)] = 3


class LoopDetectionSettings(ConfigModel):
    """``services.loopDetection``: catching runaway tool calls and output."""

    enabled: bool = True
    max_turns: Annotated[int, Field(ge=1)] = 50
    repeat_threshold: Annotated[int, Field(ge=2)] = 3
    output_similarity: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_cycle_period: Annotated[int, Field(ge=1, le=10)] = 5
    on_detect: Literal["nudge", "stop"] = "nudge"


class FileDiscoverySettings(ConfigModel):
    """``services.fileDiscovery``: which project files the model sees."""

    max_depth: Annotated[int, Field(ge=0)] = 10
    follow_symlinks: bool = False
    builtin_ignores: list[str] = Field(default_factory=lambda: list(DEFAULT_BUILTIN_IGNORES))
    max_files: Annotated[int, Field(ge=1)] = 100_000

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

    token_budget: Annotated[int, Field(ge=0)] = 2048
    load_project_files: bool = True


class ServicesSettings(ConfigModel):
    """``services``: one section per service of spec 001."""

    session: SessionSettings = Field(default_factory=SessionSettings)
    compression: CompressionSettings = Field(default_factory=CompressionSettings)
    loop_detection: LoopDetectionSettings = Field(default_factory=LoopDetectionSettings)
    file_discovery: FileDiscoverySettings = Field(default_factory=FileDiscoverySettings)
    environment: EnvironmentSettings = Field(default_factory=EnvironmentSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)


class SnapshotSettings(ConfigModel):
    """``snapshots`` (spec 003): rollback points of the active context."""

    enabled: bool = True
    max_count: Annotated[int, Field(ge=1)] = 5
    auto_create: bool = True
    auto_threshold: Annotated[float, Field(gt=0, le=1)] = 0.85
    data_dir: Path = Field(default_factory=lambda: ollm_home() / "context-snapshots")

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()


class OllamaSettings(ConfigModel):
    """``provider.ollama``: where the Ollama server answers."""

    host: str = "http://127.0.0.1:11434"
    timeout: Annotated[float, Field(gt=0)] = 300.0
    default_context_window: Annotated[int, Field(ge=512)] = 4096
    # The most of a model's window OLLM asks Ollama to allocate (``num_ctx``):
    # a 128k window would cost gigabytes of KV cache on a laptop.
    max_context_window: Annotated[int, Field(ge=512)] = 8192


class EmbeddedSettings(ConfigModel):
    """``provider.embedded``: llama.cpp in-process on a GGUF file."""

    model_path: Path | None = None
    context_window: Annotated[int, Field(ge=256)] = 2048
    # llama.cpp's threads spin while they wait: more threads than half the cores
    # makes a busy machine crawl (2 threads on 2 cores ran 25-80x slower here)
    threads: Annotated[int, Field(ge=1)] = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 2) // 2)
    )
    max_tokens: Annotated[int, Field(ge=1)] = 256
    seed: int = 1234
    # None keeps llama.cpp's default sampling; 0 makes answers repeatable
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None


class SimulatedSettings(ConfigModel):
    """``provider.simulated``: the load-test provider (never the chat default)."""

    latency_ms: Annotated[float, Field(ge=0)] = 50.0
    output_tokens: Annotated[int, Field(ge=1)] = 32
    tool_call_every: Annotated[int, Field(ge=0)] = 0
    context_window: Annotated[int, Field(ge=256)] = 8192


class ProviderSettings(ConfigModel):
    """``provider``: which model answers."""

    name: Literal["auto", "ollama", "embedded", "simulated"] = "auto"
    model: str | None = None
    ollama: OllamaSettings = Field(default_factory=OllamaSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    simulated: SimulatedSettings = Field(default_factory=SimulatedSettings)


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
    wall_time_s: Annotated[float, Field(gt=0)] = 60.0
    cpu_time_s: Annotated[int, Field(ge=1)] = 60
    memory_mb: Annotated[int, Field(ge=16)] = 1024
    max_output_bytes: Annotated[int, Field(ge=256)] = 64 * 1024
    max_processes: Annotated[int, Field(ge=1)] = 256


class ToolSettings(ConfigModel):
    """``tools``: approval policy per tool and the sandbox."""

    approval: dict[str, Approval] = Field(default_factory=_default_approval)
    default_approval: Approval = "ask"
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)


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
    """One lifecycle hook: ``command`` runs on ``event`` with the event as JSON on stdin."""

    event: HookEvent
    command: str
    timeout_s: Annotated[float, Field(gt=0)] = 10.0
    priority: int = 50


class RuntimeServiceSettings(ConfigModel):
    """``runtime.service``: the long-lived local service (``ollm service``).

    Times are in seconds.
    """

    auto_start: bool = True
    """The first command that needs the service starts it (else: `ollm service start`)."""
    idle_timeout: Annotated[float, Field(gt=0)] = 1800.0
    """The service stops itself after this long with no client and no background work."""
    background_timeout: Annotated[float, Field(gt=0)] = 300.0
    """How long a conversation's background work may run after its client left."""
    stop_timeout: Annotated[float, Field(gt=0)] = 30.0
    """`ollm service stop` waits this long for background work before cutting it short."""
    start_timeout: Annotated[float, Field(gt=0)] = 90.0
    """How long a command waits for a starting service to answer."""


class RuntimeSettings(ConfigModel):
    """``runtime``: where the actors run and how many of them.

    ``kind``: ``service`` (the default) runs conversations in the long-lived local
    service; ``ray`` starts a Ray pipeline for the command alone (or uses the
    cluster at ``rayAddress``); ``inprocess`` keeps everything in the command.
    """

    kind: Literal["service", "ray", "inprocess"] = "service"
    ray_address: str | None = None
    tool_workers: Annotated[int, Field(ge=1)] = 2
    compression_actors: Annotated[int, Field(ge=1)] = 1
    tool_worker_cpus: Annotated[float, Field(ge=0)] = 0.25
    compression_cpus: Annotated[float, Field(ge=0)] = 0.25
    max_inflight: Annotated[int, Field(ge=1)] = 256
    max_restarts: Annotated[int, Field(ge=0)] = 5
    service: RuntimeServiceSettings = Field(default_factory=RuntimeServiceSettings)


class OllmSettings(ConfigModel):
    """The effective configuration of OLLM (defaults < user file < workspace file < env)."""

    services: ServicesSettings = Field(default_factory=ServicesSettings)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    hooks: list[HookSettings] = Field(default_factory=list)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
