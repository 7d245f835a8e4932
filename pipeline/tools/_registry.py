"""The tools the model may call: the built-in ones and those extensions add.

Example::

    registry = ToolRegistry.builtin()
    registry.names()         # ['edit_file', 'glob', 'grep', 'list_files', 'read_file', ...]
    registry.schemas()       # one function-calling schema per tool, for the provider
    registry.register(MyTool())
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools._base import Tool
from ollm_cli.pipeline.tools._files import EditFileTool, ReadFileTool, WriteFileTool
from ollm_cli.pipeline.tools._search import GlobTool, GrepTool, ListFilesTool
from ollm_cli.pipeline.tools._shell import ShellTool

logger = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def builtin_tools() -> list[Tool[Any]]:
    """A fresh instance of each built-in tool."""
    return [
        ShellTool(),
        ReadFileTool(),
        WriteFileTool(),
        EditFileTool(),
        ListFilesTool(),
        GlobTool(),
        GrepTool(),
    ]


class ToolRegistry:
    """Tools by name; :meth:`schemas` is what the provider is told."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.register(tool)

    @classmethod
    def builtin(cls) -> ToolRegistry:
        """A registry holding the built-in tools."""
        return cls(builtin_tools())

    def register(self, tool: Tool[Any], *, replace: bool = False) -> None:
        """Add ``tool``; a name already taken is an error unless ``replace``."""
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ToolError(
                f"cannot register a tool named {name!r}",
                hint="a tool name is 1 to 64 letters, digits, '_' or '-'",
            )
        if name in self._tools and not replace:
            raise ToolError(
                f"a tool named {name!r} is already registered",
                hint="give the extension's tool another name",
            )
        self._tools[name] = tool
        logger.debug("tools: registered %s", name)

    def get(self, name: str) -> Tool[Any] | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The names of the tools, sorted."""
        return sorted(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The function-calling schema of every tool, in registration order."""
        return [tool.json_schema() for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
