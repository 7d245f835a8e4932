"""ToolExecutor, ApprovalPolicy, ToolRegistry and the shell tool, end to end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from ollm_cli.config.settings import EnvironmentSettings, SandboxSettings, ToolSettings
from ollm_cli.pipeline.environment import EnvironmentSanitizationService
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.records import SessionToolCall, ToolCallPart
from ollm_cli.pipeline.tools import (
    ApprovalOutcome,
    ApprovalPolicy,
    Tool,
    ToolContext,
    ToolExecutor,
    ToolOutput,
    ToolRegistry,
)
from ollm_cli.pipeline.tools._base import ToolArgs

OPENAI_KEY = "sk-proj-" + "Q7x9Lm2Vb8Nc4Rt6Yp1Zs3Kd5Fg0Hj" + "WwEe"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def call(name: str, **args: Any) -> ToolCallPart:
    return ToolCallPart(id=f"call_{name}", name=name, args=args)


@pytest.fixture
def settings() -> ToolSettings:
    return ToolSettings(
        sandbox=SandboxSettings(wall_time_s=10, max_output_bytes=4096, max_processes=64)
    )


@pytest.fixture
def executor(settings: ToolSettings, workspace: Path) -> ToolExecutor:
    return ToolExecutor(settings, workspace=workspace)


def run(
    executor: ToolExecutor, part: ToolCallPart, env: dict[str, str], approval: Any = True
) -> SessionToolCall:
    return executor.execute(part, env, approval)


# -- the record ------------------------------------------------------------------------


def test_executor_records_a_successful_call(
    executor: ToolExecutor, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    record = run(executor, call("read_file", path="a.txt"), plain_env)
    assert record.success is True and record.error is None
    assert record.id == "call_read_file" and record.args == {"path": "a.txt"}
    assert record.result.llm_content == "hello\n"
    assert record.duration_ms is not None and record.duration_ms >= 0
    saved = record.to_dict()
    assert saved["durationMs"] == record.duration_ms and saved["success"] is True
    assert saved["result"]["llmContent"] == "hello\n"
    assert saved["result"]["returnDisplay"] == "Read 1 lines (6 bytes) from a.txt"


def test_executor_shell_runs_in_the_sandbox(
    executor: ToolExecutor, workspace: Path, plain_env: dict[str, str]
) -> None:
    record = run(executor, call("shell", command="echo hi; echo oops >&2"), plain_env)
    assert record.success is True
    assert record.result.llm_content == "Exit code: 0\nStdout:\nhi\n\nStderr:\noops\n"
    assert record.result.return_display == "hi\noops"
    failed = run(executor, call("shell", command="exit 4"), plain_env)
    assert failed.success is False and failed.error == "the command exited with code 4"
    assert "Stdout:\n(empty)" in failed.result.llm_content


def test_executor_shell_cwd_and_its_boundary(
    executor: ToolExecutor, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / "sub").mkdir()
    record = run(executor, call("shell", command="pwd", cwd="sub"), plain_env)
    assert record.result.return_display == str((workspace / "sub").resolve())
    outside = run(executor, call("shell", command="pwd", cwd="../.."), plain_env)
    assert outside.success is False and "outside the workspace" in (outside.error or "")


def test_executor_shell_reports_the_limit_that_stopped_it(
    workspace: Path, plain_env: dict[str, str]
) -> None:
    settings = ToolSettings(sandbox=SandboxSettings(wall_time_s=1))
    executor = ToolExecutor(settings, workspace=workspace)
    record = run(executor, call("shell", command="sleep 20"), plain_env)
    assert record.success is False
    assert record.error == "the command was stopped: it ran longer than the wall-time limit of 1 s"
    assert "Stopped: it ran longer" in record.result.llm_content


def test_executor_shell_refused_without_bwrap_names_the_key(
    settings: ToolSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    executor = ToolExecutor(settings, workspace=workspace, bwrap_path=tmp_path / "no-bwrap")
    record = run(executor, call("shell", command="echo hi"), plain_env)
    assert record.success is False
    assert "tools.sandbox.allowUnsandboxed" in (record.error or "")
    assert "tools.sandbox.allowUnsandboxed" in record.result.llm_content


def test_shell_env_holds_no_secret_of_the_parent(
    executor: ToolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    env = EnvironmentSanitizationService(EnvironmentSettings()).sanitize(os.environ)
    record = run(executor, call("shell", command="env"), env)
    assert record.success is True
    output = record.result.llm_content
    assert "PATH=" in output and "PAGER=cat" in output
    for secret in ("OPENAI_API_KEY", OPENAI_KEY, "GITHUB_TOKEN", GITHUB_TOKEN):
        assert secret not in output
        assert secret not in str(record.to_dict())


secret_names = st.sampled_from(
    ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "MY_SECRET"]
)
secret_values = st.text(alphabet="abcdefghijkmnpqrstuvwxyz23456789", min_size=12, max_size=24)


@given(secrets=st.dictionaries(secret_names, secret_values, min_size=1, max_size=5))
def test_property_27_tool_env_holds_only_sanitized_variables(
    executor: ToolExecutor, plain_env: dict[str, str], secrets: dict[str, str]
) -> None:
    parent = {**plain_env, "SAFE_SETTING": "visible", **secrets}
    env = EnvironmentSanitizationService(EnvironmentSettings()).sanitize(parent)
    record = run(executor, call("shell", command="env"), env)
    assert "SAFE_SETTING=visible" in record.result.llm_content
    for name, value in secrets.items():
        assert f"{name}=" not in record.result.llm_content
        assert value not in record.result.llm_content


@given(secret=secret_values)
def test_property_28_tool_errors_hold_no_secret_values(
    executor: ToolExecutor, plain_env: dict[str, str], secret: str
) -> None:
    parent = {**plain_env, "SERVICE_TOKEN": secret}
    env = EnvironmentSanitizationService(EnvironmentSettings()).sanitize(parent)
    record = run(executor, call("shell", command='echo "$SERVICE_TOKEN" >&2; exit 3'), env)
    assert record.success is False
    assert secret not in (record.error or "")
    assert secret not in record.result.llm_content


# -- refusals that never reach the tool -----------------------------------------------------


def test_executor_denied_call_does_not_run(
    executor: ToolExecutor, workspace: Path, plain_env: dict[str, str]
) -> None:
    record = run(executor, call("write_file", path="x.txt", content="x"), plain_env, False)
    assert record.success is False
    assert record.error == "not run: the write_file call was not approved"
    assert not (workspace / "x.txt").exists()
    policy = ApprovalPolicy(ToolSettings(), interactive=False)
    outcome = policy.resolve(call("write_file", path="x.txt", content="x"))
    record = run(executor, call("write_file", path="x.txt", content="x"), plain_env, outcome)
    assert "nobody can answer" in (record.error or "")
    assert not (workspace / "x.txt").exists()


def test_executor_unknown_tool_lists_the_tools(
    executor: ToolExecutor, plain_env: dict[str, str]
) -> None:
    record = run(executor, call("delete_everything"), plain_env)
    assert record.success is False
    assert record.error is not None
    assert "no tool named 'delete_everything'" in record.error
    for name in ("shell", "read_file", "edit_file", "grep"):
        assert name in record.error


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "'path' is required"),
        ({"path": 3}, "'path': Input should be a valid string"),
        ({"path": "a", "offset": -1}, "'offset': Input should be greater than or equal to 0"),
        ({"path": "a", "colour": "red"}, "'colour' is not an argument of read_file"),
    ],
)
def test_executor_invalid_arguments_name_the_field(
    executor: ToolExecutor, plain_env: dict[str, str], args: dict[str, Any], expected: str
) -> None:
    record = run(executor, ToolCallPart(id="c1", name="read_file", args=args), plain_env)
    assert record.success is False
    assert record.error is not None and record.error.startswith("invalid arguments for read_file")
    assert expected in record.error


def test_executor_needs_a_workspace(settings: ToolSettings, plain_env: dict[str, str]) -> None:
    record = ToolExecutor(settings).execute(call("read_file", path="a"), plain_env, True)
    assert record.success is False and "no workspace" in (record.error or "")


def test_executor_workspace_per_call_and_sandbox_reuse(
    settings: ToolSettings, workspace: Path, tmp_path: Path, plain_env: dict[str, str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("other\n")
    executor = ToolExecutor(settings, workspace=workspace)
    record = executor.execute(call("read_file", path="o.txt"), plain_env, True, workspace=other)
    assert record.result.llm_content == "other\n"
    assert executor.sandbox(other) is executor.sandbox(other)
    assert executor.sandbox(other) is not executor.sandbox(workspace)
    missing = executor.execute(
        call("read_file", path="o.txt"), plain_env, True, workspace=tmp_path / "gone"
    )
    assert missing.success is False and "not a directory" in (missing.error or "")


class BoomArgs(ToolArgs):
    kind: str


class BoomTool(Tool[BoomArgs]):
    name = "boom"
    description = "Fails in the way it is told to."
    args_model = BoomArgs

    def run(self, args: BoomArgs, ctx: ToolContext) -> ToolOutput:
        if args.kind == "os":
            raise PermissionError(13, "Permission denied", str(ctx.workspace / "locked.txt"))
        if args.kind == "tool":
            raise ToolError("it went wrong", hint="try something else")
        raise RuntimeError("unexpected")


def test_executor_turns_tool_failures_into_failed_records(
    settings: ToolSettings, workspace: Path, plain_env: dict[str, str]
) -> None:
    registry = ToolRegistry([BoomTool()])
    executor = ToolExecutor(settings, registry, workspace=workspace)
    os_error = run(executor, call("boom", kind="os"), plain_env)
    assert os_error.error == "boom failed: Permission denied (locked.txt)"
    tool_error = run(executor, call("boom", kind="tool"), plain_env)
    assert tool_error.error == "it went wrong\n  hint: try something else"
    bug = run(executor, call("boom", kind="other"), plain_env)
    assert bug.error is not None and "bug in the tool" in bug.error and "RuntimeError" in bug.error
    assert executor.schemas() == [BoomTool().json_schema()]


# -- approval ---------------------------------------------------------------------------------


def test_approval_follows_the_config(settings: ToolSettings) -> None:
    policy = ApprovalPolicy(settings, interactive=False)
    assert policy.decide("read_file") == "allow"
    assert policy.decide("shell") == "ask"
    assert policy.decide("some_extension_tool") == settings.default_approval
    denying = ToolSettings(approval={"shell": "deny"}, default_approval="deny")
    outcome = ApprovalPolicy(denying, interactive=True, ask=lambda c: True).resolve(call("shell"))
    assert not outcome.approved and "tools.approval.shell: deny" in outcome.reason
    assert ApprovalPolicy(denying, interactive=False).decide("read_file") == "deny"


def test_approval_allow_needs_no_question() -> None:
    asked: list[str] = []

    def ask(call: ToolCallPart) -> bool:
        asked.append(call.name)
        return False

    policy = ApprovalPolicy(ToolSettings(), interactive=True, ask=ask)
    outcome = policy.resolve(call("read_file", path="a"))
    assert outcome.approved and outcome.decision == "allow"
    assert asked == []


@pytest.mark.parametrize("answer", [True, False])
def test_approval_ask_asks_the_user_in_interactive_runs(answer: bool) -> None:
    asked: list[ToolCallPart] = []

    def ask(part: ToolCallPart) -> bool:
        asked.append(part)
        return answer

    policy = ApprovalPolicy(ToolSettings(), interactive=True, ask=ask)
    part = call("shell", command="ls")
    outcome = policy.resolve(part)
    assert asked == [part]
    assert outcome.approved is answer and outcome.decision == "ask"
    assert outcome.reason == ("approved by the user" if answer else "the user declined this call")


def test_approval_ask_means_deny_in_batch() -> None:
    for policy in (
        ApprovalPolicy(ToolSettings(), interactive=False, ask=lambda c: True),
        ApprovalPolicy(ToolSettings(), interactive=True, ask=None),
    ):
        outcome = policy.resolve(call("shell", command="ls"))
        assert not outcome.approved
        assert "tools.approval.shell: allow" in outcome.reason


def test_approval_outcome_allowed() -> None:
    assert ApprovalOutcome.allowed().approved


# -- registry and schemas ------------------------------------------------------------------


def test_registry_holds_the_builtin_tools_with_ollama_schemas() -> None:
    registry = ToolRegistry.builtin()
    expected = ["edit_file", "glob", "grep", "list_files", "read_file", "shell", "write_file"]
    assert registry.names() == expected
    assert len(registry) == 7 and "shell" in registry and "nope" not in registry
    for schema in registry.schemas():
        assert schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"]
        assert function["parameters"]["type"] == "object"
        assert "description" not in function["parameters"]
        assert_no_titles(function["parameters"])
    read_file = registry.get("read_file")
    assert read_file is not None
    parameters = read_file.json_schema()["function"]["parameters"]
    assert parameters["required"] == ["path"]
    assert parameters["properties"]["limit"]["type"] == "integer"
    assert "default" not in parameters["properties"]["limit"]
    assert parameters["additionalProperties"] is False


def assert_no_titles(node: Any) -> None:
    if isinstance(node, dict):
        assert "title" not in node or isinstance(node["title"], dict)
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    assert_no_titles(sub)
            else:
                assert_no_titles(value)
    elif isinstance(node, list):
        for item in node:
            assert_no_titles(item)


class TitledArgs(BaseModel):
    title: str
    note: str | None = None


class TitledTool(Tool[TitledArgs]):
    name = "titled"
    description = "Has an argument named title."
    args_model = TitledArgs

    def run(self, args: TitledArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput.ok(args.title)


def test_schema_keeps_an_argument_named_title() -> None:
    parameters = TitledTool().json_schema()["function"]["parameters"]
    assert parameters["properties"]["title"] == {"type": "string"}
    assert parameters["properties"]["note"] == {"type": "string"}
    assert parameters["required"] == ["title"]


def test_registry_register_rules() -> None:
    registry = ToolRegistry()
    assert registry.schemas() == []
    registry.register(TitledTool())
    with pytest.raises(ToolError, match="already registered"):
        registry.register(TitledTool())
    registry.register(TitledTool(), replace=True)
    assert [t.name for t in registry] == ["titled"]
    bad = TitledTool()
    bad.name = "bad name!"
    with pytest.raises(ToolError, match="cannot register"):
        registry.register(bad)
