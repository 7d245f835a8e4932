"""What every tool is: a name, a description, an arguments model and ``run``.

A tool declares its arguments as a pydantic model; :meth:`Tool.json_schema`
turns it into the function-calling schema Ollama expects, and the executor
validates the model's arguments against it before anything runs. ``run``
returns a :class:`ToolOutput`: ``llm_content`` is what the model reads,
``return_display`` the short line the user sees (the spec's two fields).

Example::

    class EchoArgs(BaseModel):
        text: str

    class EchoTool(Tool[EchoArgs]):
        name = "echo"
        description = "Return the text unchanged."
        args_model = EchoArgs

        def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
            return ToolOutput.ok(args.text, f"echoed {len(args.text)} characters")
"""

from __future__ import annotations

import copy
import functools
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from ollm_cli.pipeline.discovery import FileDiscoveryService
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools.isolation._overlay import WorkspaceOverlay

ArgsT = TypeVar("ArgsT", bound=BaseModel)


class ToolArgs(BaseModel):
    """Base of tool arguments: unknown arguments are an error that names them."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ToolOutput(BaseModel):
    """What a tool run produced.

    ``error`` says what went wrong (and what to do) when ``success`` is false;
    ``llm_content`` then carries the same text so the model can react to it.
    """

    llm_content: str
    return_display: str | None = None
    success: bool = True
    error: str | None = None

    @classmethod
    def ok(cls, llm_content: str, return_display: str | None = None) -> ToolOutput:
        """A successful result."""
        return cls(llm_content=llm_content, return_display=return_display)

    @classmethod
    def failure(cls, error: str, return_display: str | None = None) -> ToolOutput:
        """A failed result whose message the model and the user both see."""
        return cls(
            llm_content=f"Error: {error}",
            return_display=return_display or f"Error: {error}",
            success=False,
            error=error,
        )


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the workspace, the sanitized environment, the sandbox,
    and the FileDiscoveryService the search tools go through."""

    workspace: Path
    env: Mapping[str, str]
    sandbox: Sandbox
    discovery: FileDiscoveryService = field(default_factory=FileDiscoveryService)
    overlay: WorkspaceOverlay | None = None
    """Set by the executor for a checkpointed call of a tool that ``runs_in_overlay``:
    its sandboxed command sees the workspace through this overlay."""


class Tool(ABC, Generic[ArgsT]):
    """A tool the model can call (subclass it and set the three attributes)."""

    name: str
    description: str
    args_model: type[ArgsT]
    guards_control_paths = False
    """Whether the tool keeps off the workspace's control paths itself (the built-in
    ones do: the sandbox, the file tools' checks); for any other the executor looks at
    them before the call and undoes what it did to them after."""
    runs_in_overlay = False
    """Whether the tool runs its commands with ``ctx.overlay`` (the shell does): then a
    checkpoint keeps only what the command changed, read from the overlay's upper
    folder, instead of scanning the whole workspace before and after."""

    def json_schema(self) -> dict[str, Any]:
        """The function-calling schema: ``{"type": "function", "function": {...}}``."""
        parameters = copy.deepcopy(_parameters_schema(self.args_model))
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def changed_paths(self, args: ArgsT) -> list[str] | None:
        """The workspace paths a call with ``args`` may change, so that their previous
        state is kept for a rewind: ``[]`` for a tool that changes no file, ``None``
        (the default, for shell and extension tools) when any file may change."""
        return None

    def parse(self, raw: Mapping[str, Any]) -> ArgsT:
        """The model's arguments validated (raises pydantic's ``ValidationError``)."""
        return self.args_model.model_validate(dict(raw))

    @abstractmethod
    def run(self, args: ArgsT, ctx: ToolContext) -> ToolOutput:
        """Do the work; raise :class:`~ollm_cli.pipeline.errors.ToolError` for a clear failure."""


@functools.cache
def _parameters_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """The function-calling parameters of ``args_model``, generated once per class
    (pydantic's JSON schema costs about 1 ms a tool, and every conversation asks for
    every tool's): callers get a copy of it."""
    parameters: dict[str, Any] = _clean_schema(args_model.model_json_schema())
    parameters.pop("description", None)  # the model's docstring, not for the model
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    return parameters


def _clean_schema(node: Any) -> Any:
    """Drop pydantic's titles and collapse ``X | None`` to ``X`` (the model may omit it)."""
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):
            cleaned[key] = {name: _clean_schema(sub) for name, sub in value.items()}
        else:
            cleaned[key] = _clean_schema(value)
    variants = cleaned.get("anyOf")
    if isinstance(variants, list) and len(variants) == 2 and {"type": "null"} in variants:
        del cleaned["anyOf"]
        cleaned.update(next(v for v in variants if v != {"type": "null"}))
        if cleaned.get("default", 0) is None:
            del cleaned["default"]
    return cleaned
