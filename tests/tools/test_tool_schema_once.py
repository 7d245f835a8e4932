"""A tool's function-calling schema is generated once per arguments model (every
conversation asks for every tool's), and each caller gets a copy of its own."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ollm_cli.pipeline.tools import Tool, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._base import _parameters_schema


class CountedArgs(BaseModel):
    path: str
    limit: int | None = None


class CountedTool(Tool[CountedArgs]):
    name = "counted"
    description = "Its schema is counted."
    args_model = CountedArgs

    def run(self, args: CountedArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput.ok(args.path)


def test_the_schema_is_generated_once_and_each_caller_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _parameters_schema.cache_clear()
    generated: list[type[BaseModel]] = []
    generate = CountedArgs.model_json_schema

    def counted(*args: object, **kwargs: object) -> dict[str, object]:
        generated.append(CountedArgs)
        return generate()

    monkeypatch.setattr(CountedArgs, "model_json_schema", counted)
    first, second = CountedTool().json_schema(), CountedTool().json_schema()
    assert generated == [CountedArgs]
    assert first == second
    assert first["function"]["parameters"]["required"] == ["path"]
    first["function"]["parameters"]["properties"]["path"]["type"] = "changed by a caller"
    first["function"]["parameters"]["required"].append("limit")
    third = CountedTool().json_schema()
    assert third["function"]["parameters"]["properties"]["path"] == {"type": "string"}
    assert third["function"]["parameters"]["required"] == ["path"]
