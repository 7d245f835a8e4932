"""Batch scripts: YAML and JSONL, variables and copies, errors that name the line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.harness._batch_script import (
    MAX_CONVERSATIONS,
    BatchScriptError,
    _node_line,
    expand,
    load_batch_script,
    parse_jsonl_script,
    parse_yaml_script,
)

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """\
name: greetings
provider: simulated
model: base-model
systemPrompt: You help the {team} team.
context:
  - {key: style, content: "Be brief, {team}.", priority: 60}
variables: {team: support}
conversations:
  - name: hello-{lang}
    variables:
      - {lang: French}
      - {lang: German, team: sales}
    copies: 2
    messages:
      - "Say hello in {lang} (copy {copy}, #{index})."
      - "Literal {{braces}} stay."
  - model: other-model
    systemPrompt: Plain.
    context: []
    messages: [Only one message]
"""


def write(tmp_path: Path, text: str, name: str = "script.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(BatchScriptError) as caught:
        load_batch_script(path)
    return str(caught.value)


def test_yaml_script_expands_variables_copies_and_defaults(tmp_path: Path) -> None:
    script = load_batch_script(write(tmp_path, SCRIPT))
    assert script.name == "greetings"
    assert script.provider == "simulated"
    assert [c.id for c in script.conversations] == ["1.1.1", "1.1.2", "1.2.1", "1.2.2", "2.1.1"]
    assert [c.index for c in script.conversations] == [1, 2, 3, 4, 5]
    first, _, german, german_copy, plain = script.conversations
    assert first.name == "hello-French"
    assert first.model == "base-model"
    assert first.system_prompt == "You help the support team."
    assert first.context[0].content == "Be brief, support."
    assert first.context[0].priority == 60
    assert first.messages == ["Say hello in French (copy 1, #1).", "Literal {braces} stay."]
    assert german.system_prompt == "You help the sales team."
    assert german_copy.messages[0] == "Say hello in German (copy 2, #4)."
    assert plain.name == "conversation 2"
    assert plain.model == "other-model"
    assert plain.system_prompt == "Plain."
    assert plain.context == []
    assert plain.line == 17
    assert script.turns == 9


def test_batch_name_defaults_to_the_file_name_and_can_be_given(tmp_path: Path) -> None:
    path = write(tmp_path, "conversations: [{messages: [hi]}]\n", "nightly.yaml")
    assert load_batch_script(path).name == "nightly"
    assert load_batch_script(path, name="other").name == "other"


def test_jsonl_script_has_one_conversation_per_line(tmp_path: Path) -> None:
    lines = [
        {"name": "a-{n}", "variables": {"n": 1}, "messages": ["one {n}"], "provider": "simulated"},
        {},
        {"messages": ["x", "y"], "copies": 2, "model": "m", "provider": "simulated"},
    ]
    text = "\n".join(orjson.dumps(line).decode() if line else "" for line in lines)
    script = load_batch_script(write(tmp_path, text, "batch.jsonl"))
    assert script.name == "batch"
    assert script.provider == "simulated"
    assert [(c.id, c.name, c.messages, c.line) for c in script.conversations] == [
        ("1.1.1", "a-1", ["one 1"], 1),
        ("2.1.1", "conversation 2", ["x", "y"], 3),
        ("2.1.2", "conversation 2", ["x", "y"], 3),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "conversations:\n  - messages: [hi]\n    bogus: 1\n",
            r"script\.yaml:3: conversations\.0\.bogus: Extra inputs",
        ),
        (
            "conversations:\n  - messages: [hi]\n  - copies: 0\n    messages: [a]\n",
            r"script\.yaml:3: conversations\.1\.copies: .*greater than or equal to 1",
        ),
        (
            "name: x\nconversations:\n  - name: y\n",
            r"script\.yaml:3: conversations\.0\.messages: Field required",
        ),
        (
            "conversations:\n  - messages:\n      - ok\n      - {lang}\n",
            r"script\.yaml:4: conversations\.0\.messages\.1: Input should be a valid string",
        ),
        ("conversations: []\n", r"script\.yaml:1: conversations: List should have at least 1"),
        ("model: m\n", r"script\.yaml:1: conversations: Field required"),
        (
            "context:\n  - {key: '  ', content: x}\nconversations: [{messages: [a]}]\n",
            r"script\.yaml:2: context\.0\.key: String should have at least 1 character",
        ),
        (
            "conversations:\n  - messages: [a]\n    variables: [{x: [1, 2]}]\n",
            r"script\.yaml:3: conversations\.0\.variables",
        ),
    ],
)
def test_property_batch_script_errors_name_the_line_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    message = error_of(write(tmp_path, text))
    assert re.search(expected, message), message
    assert "hint:" in message


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "conversations:\n  - messages: [hello {who}]\n"))
    assert "script.yaml:2: the batch script is not valid YAML" in message
    assert "quote" in message


def test_a_script_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    assert "must be a mapping" in error_of(write(tmp_path, "- just\n- a list\n"))


def test_unknown_variable_names_the_conversation_and_the_fix(tmp_path: Path) -> None:
    text = "conversations:\n  - messages: [a]\n  - name: n\n    messages: ['hi {who}']\n"
    message = error_of(write(tmp_path, text))
    assert "script.yaml:3: conversation 2: messages[0] uses {who}" in message
    assert "defined: copy, index" in message
    assert "{{who}}" in message


def test_a_conversation_may_not_switch_provider(tmp_path: Path) -> None:
    text = "provider: simulated\nconversations:\n  - messages: [a]\n    provider: ollama\n"
    message = error_of(write(tmp_path, text))
    assert "script.yaml:3: conversations.0.provider" in message
    assert "'ollama'" in message


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"messages": ["a"]}', "{not json"], r"batch\.jsonl:2: not valid JSON"),
        (['{"messages": ["a"]}', "[1, 2]"], r"batch\.jsonl:2: a line must be a JSON object"),
        (
            ['{"messages": ["a"]}', "", '{"messages": []}'],
            r"batch\.jsonl:3: messages: List should have at least 1",
        ),
        (
            [
                '{"messages": ["a"], "provider": "simulated"}',
                '{"messages": ["b"], "provider": "ollama"}',
            ],
            r"batch\.jsonl:2: provider: .*line 1 asks for 'simulated'",
        ),
        (["", "  "], r"batch\.jsonl: the JSONL script holds no conversation"),
        (['{"messages": ["{x}"]}'], r"batch\.jsonl:1: conversation 1: messages\[0\] uses \{x\}"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path: Path, lines: list[str], expected: str) -> None:
    message = error_of(write(tmp_path, "\n".join(lines), "batch.jsonl"))
    assert re.search(expected, message), message


def test_missing_and_unreadable_scripts_are_clear_errors(tmp_path: Path) -> None:
    assert "does not exist" in error_of(tmp_path / "nope.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert "cannot be read (UnicodeDecodeError)" in error_of(binary)


def test_a_script_expanding_past_the_limit_is_refused(tmp_path: Path) -> None:
    variables = ", ".join(f"{{v: {i}}}" for i in range(20))
    text = f"conversations:\n  - messages: [a]\n    copies: 10000\n    variables: [{variables}]\n"
    assert f"more than {MAX_CONVERSATIONS} conversations" in error_of(write(tmp_path, text))


def test_the_example_batch_script_of_deploy_loads() -> None:
    script = load_batch_script(REPO / "deploy" / "examples" / "batch.yaml")
    assert script.name == "support-triage"
    assert len(script.conversations) == 10
    assert script.conversations[0].messages[0] == "How do I install OLLM on Linux?"
    last = script.conversations[-1]
    assert last.context[0].content == 'Reply with a JSON object {"ok": true} only.'


# ------------------------------------------------------------------ properties

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n not in {"copy", "index"}
)
LITERAL = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="{}"), max_size=12
)


@given(
    st.dictionaries(NAMES, st.text(max_size=10) | st.integers(), min_size=1, max_size=4),
    st.lists(st.tuples(LITERAL, st.booleans()), max_size=6),
    st.data(),
)
def test_property_expansion_replaces_each_placeholder_by_its_value(
    variables: dict[str, Any], pieces: list[tuple[str, bool]], data: st.DataObject
) -> None:
    template, expected = "", ""
    for literal, with_placeholder in pieces:
        template += literal
        expected += literal
        if with_placeholder:
            name = data.draw(st.sampled_from(sorted(variables)))
            template += "{" + name + "}"
            expected += str(variables[name])
        else:
            template += "{{x}}"
            expected += "{x}"
    assert expand(template, variables, where="m") == expected


CONVERSATION = st.fixed_dictionaries(
    {
        "messages": st.lists(
            st.text(alphabet="abc xyz", min_size=1, max_size=8), min_size=1, max_size=3
        )
    },
    optional={
        "copies": st.integers(1, 3),
        "variables": st.lists(st.fixed_dictionaries({"v": st.integers(0, 9)}), max_size=3),
    },
)


@given(st.lists(CONVERSATION, min_size=1, max_size=5))
def test_property_expansion_count_and_ids(conversations: list[dict[str, Any]]) -> None:
    text = yaml.safe_dump({"name": "p", "conversations": conversations})
    script = parse_yaml_script(text, Path("p.yaml"))
    expected = sum(
        max(len(c.get("variables") or [{}]), 1) * c.get("copies", 1) for c in conversations
    )
    assert len(script.conversations) == expected
    assert len({c.id for c in script.conversations}) == expected
    assert [c.index for c in script.conversations] == list(range(1, expected + 1))
    assert script.digest == parse_yaml_script(text, Path("p.yaml")).digest
    as_jsonl = "\n".join(orjson.dumps(c).decode() for c in conversations)
    assert parse_jsonl_script(as_jsonl, Path("p.jsonl")).turns == script.turns


@given(st.lists(CONVERSATION, min_size=1, max_size=5), st.data())
def test_property_unknown_keys_are_reported_at_their_line(
    conversations: list[dict[str, Any]], data: st.DataObject
) -> None:
    target = data.draw(st.integers(0, len(conversations) - 1))
    conversations[target] = {**conversations[target], "zz_unknown_key": 1}
    text = yaml.safe_dump({"conversations": conversations}, sort_keys=True)
    line = next(
        number
        for number, content in enumerate(text.splitlines(), start=1)
        if "zz_unknown_key" in content
    )
    with pytest.raises(BatchScriptError) as caught:
        parse_yaml_script(text, Path("s.yaml"))
    assert f"s.yaml:{line}: conversations.{target}.zz_unknown_key" in str(caught.value)


@given(st.lists(CONVERSATION, min_size=1, max_size=3), st.text(alphabet="xyz", min_size=1))
def test_property_digest_changes_when_a_message_changes(
    conversations: list[dict[str, Any]], extra: str
) -> None:
    before = parse_yaml_script(yaml.safe_dump({"conversations": conversations}), Path("a"))
    conversations[0]["messages"] = [*conversations[0]["messages"], extra]
    after = parse_yaml_script(yaml.safe_dump({"conversations": conversations}), Path("a"))
    assert before.digest != after.digest


def test_booleans_expand_as_yaml_writes_them(tmp_path: Path) -> None:
    text = "conversations:\n  - variables: {a: true, b: false}\n    messages: ['{a}/{b}']\n"
    script = load_batch_script(write(tmp_path, text))
    assert script.conversations[0].messages == ["true/false"]


def test_line_lookup_stops_at_the_deepest_node_the_file_has() -> None:
    root = yaml.compose("a:\n  - x\n  - y\nb: 1\n", Loader=yaml.SafeLoader)
    assert root is not None
    assert _node_line(root, ["a", 1]) == 3
    assert _node_line(root, ["a", 7]) == 1  # no such item: the key's line
    assert _node_line(root, ["a", "key"]) == 1  # a list has no keys
    assert _node_line(root, ["missing"]) == 1
    assert _node_line(root, ["b", 0]) == 4
