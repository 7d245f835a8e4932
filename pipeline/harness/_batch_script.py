"""Batch scripts: the conversations ``ollm batch`` runs, read from YAML or JSONL.

A YAML script names the batch, its defaults and its conversations::

    name: greetings                 # tags every session (default: the file's name)
    provider: simulated             # one provider for the whole batch (optional)
    model: llama3.2                 # default model of every conversation
    systemPrompt: You are terse.
    context:                        # entries every conversation starts with
      - {key: style, content: "Answer in one sentence.", priority: 60}
    variables: {team: support}      # defaults for every conversation
    conversations:
      - name: hello-{lang}
        variables:                  # one conversation per mapping...
          - {lang: French}
          - {lang: German}
        copies: 2                   # ...each run twice
        messages:
          - Say hello in {lang} for the {team} team.
          - Now say goodbye.

A JSONL script holds one conversation object per line (the fields of an entry
of ``conversations``, plus ``provider``). In every text (name, system prompt,
context, messages) ``{name}`` is replaced by the variable's value; ``{copy}``
(1-based copy number) and ``{index}`` (1-based position in the batch) are
always defined; ``{{`` and ``}}`` write literal braces. Any error names the
file, the line and the key.

Example::

    script = load_batch_script(Path("batch.yaml"))
    for conversation in script.conversations:
        print(conversation.id, conversation.messages)
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

from ollm_cli.pipeline.errors import ConfigError

logger = logging.getLogger(__name__)

MAX_CONVERSATIONS = 100_000
MAX_COPIES = 10_000
DEFAULT_CONTEXT_PRIORITY = 50
BUILTIN_VARIABLES = ("copy", "index")

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

ProviderName = Literal["auto", "ollama", "embedded", "simulated"]
Text = Annotated[str, StringConstraints(min_length=1)]
Scalar = str | int | float | bool


class BatchScriptError(ConfigError):
    """A batch script cannot be read: its message names the file, line and key."""


class ScriptModel(BaseModel):
    """Base of the script's models: camelCase keys, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ContextItem(ScriptModel):
    """A context entry a conversation starts with (added with source ``user``)."""

    key: Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]
    content: Text
    priority: Annotated[int, Field(ge=0, le=1000)] = DEFAULT_CONTEXT_PRIORITY


class ConversationSpec(ScriptModel):
    """One entry of ``conversations`` (or one line of a JSONL script)."""

    name: Text | None = None
    model: Text | None = None
    provider: ProviderName | None = None
    system_prompt: Text | None = None
    context: list[ContextItem] | None = None
    variables: list[dict[str, Scalar]] | dict[str, Scalar] | None = None
    copies: Annotated[int, Field(ge=1, le=MAX_COPIES)] = 1
    messages: Annotated[list[Text], Field(min_length=1)]

    def variable_sets(self) -> list[dict[str, Scalar]]:
        """The variable mappings, one conversation (times ``copies``) each."""
        if self.variables is None:
            return [{}]
        if isinstance(self.variables, dict):
            return [self.variables]
        return self.variables or [{}]


class ScriptFile(ScriptModel):
    """The whole YAML script."""

    name: Text | None = None
    provider: ProviderName | None = None
    model: Text | None = None
    system_prompt: Text | None = None
    context: list[ContextItem] = Field(default_factory=list)
    variables: dict[str, Scalar] = Field(default_factory=dict)
    conversations: Annotated[list[ConversationSpec], Field(min_length=1)]


class BatchConversation(BaseModel):
    """One conversation to run: every variable expanded, every default applied."""

    model_config = ConfigDict(frozen=True)

    id: str
    index: int
    name: str
    model: str | None = None
    system_prompt: str | None = None
    context: list[ContextItem] = Field(default_factory=list)
    messages: list[str]
    line: int


class BatchScript(BaseModel):
    """A loaded script: the batch's name and provider, and its conversations in order."""

    name: str
    provider: ProviderName | None = None
    source: Path
    conversations: list[BatchConversation]

    @property
    def digest(self) -> str:
        """A fingerprint of what the batch sends and how it tags it (``--resume-batch``
        refuses a changed script)."""
        payload = [
            [c.id, c.model, c.system_prompt, [i.model_dump() for i in c.context], c.messages]
            for c in self.conversations
        ]
        return hashlib.sha256(orjson.dumps([self.name, self.provider, payload])).hexdigest()

    @property
    def turns(self) -> int:
        """How many user messages the batch sends in all."""
        return sum(len(c.messages) for c in self.conversations)


# ------------------------------------------------------------------ expansion


def expand(text: str, variables: Mapping[str, Scalar], *, where: str) -> str:
    """Replace each ``{name}`` in ``text``; ``{{``/``}}`` are literal braces.

    >>> expand("hi {who} {{x}}", {"who": "Ann"}, where="m")
    'hi Ann {x}'
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if name not in variables:
            known = ", ".join(sorted(variables)) or "none"
            raise KeyError(
                f"{where} uses {{{name}}}, which no variable defines (defined: {known}); "
                f"define it under `variables`, or write {{{{{name}}}}} for literal braces"
            )
        return _scalar_text(variables[name])

    return _PLACEHOLDER.sub(replace, text)


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _expand_spec(
    spec: ConversationSpec,
    *,
    number: int,
    first_index: int,
    defaults: ScriptFile | None,
    source: Path,
    line: int,
) -> list[BatchConversation]:
    base_variables = dict(defaults.variables) if defaults is not None else {}
    model = spec.model or (defaults.model if defaults else None)
    system_prompt = spec.system_prompt or (defaults.system_prompt if defaults else None)
    context = spec.context if spec.context is not None else (defaults.context if defaults else [])
    label = f"{source}:{line}: conversation {number}"
    variable_sets = spec.variable_sets()
    if first_index - 1 + len(variable_sets) * spec.copies > MAX_CONVERSATIONS:
        raise BatchScriptError(
            f"{label}: the script expands to more than {MAX_CONVERSATIONS} conversations",
            hint="lower `copies` or the number of `variables` sets, or split the batch",
        )
    made: list[BatchConversation] = []
    for variant, own in enumerate(variable_sets, start=1):
        for copy in range(1, spec.copies + 1):
            index = first_index + len(made)
            variables: dict[str, Scalar] = {
                "copy": copy,
                "index": index,
                **base_variables,
                **own,
            }
            try:
                made.append(
                    _conversation(
                        spec,
                        variables,
                        id=f"{number}.{variant}.{copy}",
                        index=index,
                        name=spec.name or f"conversation {number}",
                        model=model,
                        system_prompt=system_prompt,
                        context=context,
                        line=line,
                    )
                )
            except KeyError as error:
                raise BatchScriptError(
                    f"{label}: {error.args[0]}",
                    hint="every {name} in a script must be a variable of the conversation",
                ) from None
    return made


def _conversation(
    spec: ConversationSpec,
    variables: dict[str, Scalar],
    *,
    id: str,
    index: int,
    name: str,
    model: str | None,
    system_prompt: str | None,
    context: list[ContextItem],
    line: int,
) -> BatchConversation:
    """One conversation of ``spec`` with its ``{variables}`` filled in (KeyError:
    one the texts name is not a variable)."""
    return BatchConversation(
        id=id,
        index=index,
        name=expand(name, variables, where="name"),
        model=model,
        system_prompt=(
            expand(system_prompt, variables, where="systemPrompt") if system_prompt else None
        ),
        context=[
            item.model_copy(
                update={"content": expand(item.content, variables, where=f"context `{item.key}`")}
            )
            for item in context
        ],
        messages=[
            expand(text, variables, where=f"messages[{i}]") for i, text in enumerate(spec.messages)
        ],
        line=line,
    )


# ----------------------------------------------------------------------- YAML


def _node_line(root: yaml.Node, location: Sequence[int | str]) -> int:
    """The 1-based line of the deepest node on ``location`` that the YAML holds."""
    node = root
    line = node.start_mark.line + 1
    for step in location:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = next(
                ((key, value) for key, value in node.value if key.value == step),
                None,
            )
            if found is None:
                return line
            line = found[0].start_mark.line + 1
            node = found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if not 0 <= step < len(node.value):
                return line
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _describe(errors: list[Any], source: Path, line_of: Any) -> str:
    lines = []
    for error in errors:
        location = [step for step in error["loc"] if not _is_union_tag(step)]
        key = ".".join(str(step) for step in location) or "(top level)"
        line = line_of(location)
        where = f"{source}:{line}" if line else str(source)
        lines.append(f"{where}: {key}: {error['msg']}")
    return "\n  ".join(lines)


def _is_union_tag(step: int | str) -> bool:
    """Pydantic names the union member it tried (``list[...]``); the file does not."""
    return isinstance(step, str) and ("[" in step or step in {"str", "int", "float", "bool"})


def parse_yaml_script(text: str, source: Path, *, name: str | None = None) -> BatchScript:
    """Validate a YAML script and expand its conversations."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else str(source)
        problem = getattr(error, "problem", None) or type(error).__name__
        raise BatchScriptError(
            f"{where}: the batch script is not valid YAML ({problem})",
            hint="fix the YAML at that line; quote texts holding `{`, `[`, `: ` or ` #` "
            '(YAML reads `- {name}` as a mapping: write `- "{name}"`)',
        ) from None
    if not isinstance(data, dict) or root is None:
        raise BatchScriptError(
            f"{source}: a batch script must be a mapping with a `conversations` list",
            hint="see deploy/examples/batch.yaml for the shape of a script",
        )
    try:
        parsed = ScriptFile.model_validate(data)
    except ValidationError as error:
        raise BatchScriptError(
            "invalid batch script:\n  "
            + _describe(error.errors(), source, lambda loc: _node_line(root, loc)),
            hint="fix the keys named above (quote a text that starts with `{`); see "
            "deploy/examples/batch.yaml for every key",
        ) from None
    conversations: list[BatchConversation] = []
    for number, spec in enumerate(parsed.conversations, start=1):
        line = _node_line(root, ["conversations", number - 1])
        if spec.provider is not None and spec.provider != parsed.provider:
            raise BatchScriptError(
                f"{source}:{line}: conversations.{number - 1}.provider: a batch runs on one "
                f"provider, and this conversation asks for {spec.provider!r}",
                hint="set `provider` once at the top of the script, or run two batches",
            )
        conversations.extend(
            _expand_spec(
                spec,
                number=number,
                first_index=len(conversations) + 1,
                defaults=parsed,
                source=source,
                line=line,
            )
        )
    return BatchScript(
        name=name or parsed.name or source.stem,
        provider=parsed.provider,
        source=source,
        conversations=conversations,
    )


# ---------------------------------------------------------------------- JSONL


def parse_jsonl_script(text: str, source: Path, *, name: str | None = None) -> BatchScript:
    """Validate a JSONL script (one conversation per line) and expand it."""
    conversations: list[BatchConversation] = []
    provider: ProviderName | None = None
    provider_line = 0
    number = 0
    for line_number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        number += 1
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise BatchScriptError(
                f"{source}:{line_number}: not valid JSON ({error})",
                hint="each line of a JSONL script is one JSON object",
            ) from None
        if not isinstance(data, dict):
            raise BatchScriptError(
                f"{source}:{line_number}: a line must be a JSON object describing a conversation",
                hint='e.g. {"messages": ["Hello"]}',
            )
        try:
            spec = ConversationSpec.model_validate(data)
        except ValidationError as error:
            raise BatchScriptError(
                "invalid batch script:\n  "
                + _describe(error.errors(), source, lambda _loc, n=line_number: n),
                hint="fix the keys named above; each line takes the keys of a YAML conversation",
            ) from None
        if spec.provider is not None:
            if provider is not None and spec.provider != provider:
                raise BatchScriptError(
                    f"{source}:{line_number}: provider: a batch runs on one provider; line "
                    f"{provider_line} asks for {provider!r} and this one for {spec.provider!r}",
                    hint="use one provider for every line, or split the file into two batches",
                )
            provider, provider_line = spec.provider, line_number
        conversations.extend(
            _expand_spec(
                spec,
                number=number,
                first_index=len(conversations) + 1,
                defaults=None,
                source=source,
                line=line_number,
            )
        )
    if not conversations:
        raise BatchScriptError(
            f"{source}: the JSONL script holds no conversation",
            hint='write one JSON object per line, e.g. {"messages": ["Hello"]}',
        )
    return BatchScript(
        name=name or source.stem, provider=provider, source=source, conversations=conversations
    )


def load_batch_script(path: Path, *, name: str | None = None) -> BatchScript:
    """Read ``path`` (``.jsonl`` as JSONL, anything else as YAML) into a :class:`BatchScript`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BatchScriptError(
            f"batch script {path} does not exist", hint="check the path of SCRIPT"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise BatchScriptError(
            f"batch script {path} cannot be read ({type(error).__name__})",
            hint="a script is a UTF-8 YAML or JSONL file you can read",
        ) from None
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        script = parse_jsonl_script(text, path, name=name)
    else:
        script = parse_yaml_script(text, path, name=name)
    logger.info(
        "batch script %s: %d conversation(s), %d turn(s)",
        path,
        len(script.conversations),
        script.turns,
    )
    return script
