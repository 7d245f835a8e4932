"""``ollm config``: what configuration is in effect, and where it came from."""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.state import report_config_problems, settings_despite_errors
from ollm_cli.config.loader import LoadedSettings, effective_items
from ollm_cli.config.paths import ollm_home

app = typer.Typer(
    help=(
        "Show the effective configuration and the files it is read from.\n\n"
        "Layers, later wins: defaults, `~/.ollm/config.yaml` (moved by `OLLM_HOME`), the "
        "workspace's `.ollm/config.yaml`, then `OLLM_*` variables such as "
        "`OLLM_SERVICES__COMPRESSION__THRESHOLD=0.7`."
    ),
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def redacted_value(key: str, value: Any) -> Any:
    """``value`` with every secret masked: token shapes, passwords in URLs, tokens in
    hook commands, and the whole value of a key whose name is a credential's.

    A key ending in ``Env`` (``provider.openai.apiKeyEnv``) holds the *name* of a
    variable, not its value: a name is shown, anything else there is masked.
    """
    from ollm_cli.pipeline.environment import redact, secret_name_word

    if isinstance(value, str):
        last = key.rsplit(".", 1)[-1]
        if last.endswith("Env"):
            return redact(value) if _VARIABLE_NAME.fullmatch(value) else "[REDACTED]"
        if value and secret_name_word(last) is not None:
            return "[REDACTED]"
        return redact(value)
    if isinstance(value, list):
        return [redacted_value(key, item) for item in value]
    if isinstance(value, dict):
        return {k: redacted_value(f"{key}.{k}", v) for k, v in value.items()}
    return value


NARROW = 80
"""Below this many columns ``config show`` prints one setting per block, not a table."""


@app.command("show")
def show(json_output: JsonOption = False) -> None:
    """Print every setting in effect and the layer that set it (secrets masked).

    With an invalid config it still prints, each invalid value at its default and
    its source saying so, then the error naming the key, and exits 3.

    Example: `ollm config show --json | jq '.[] | select(.source != "default")'`
    """
    loaded = settings_despite_errors()
    items = [(k, redacted_value(k, v), source) for k, v, source in effective_items(loaded)]
    if json_output:
        print_json([{"key": k, "value": v, "source": s} for k, v, s in items])
    elif console.width < NARROW:
        for key, value, source in items:
            console.print(f"[cyan]{escape(key)}[/]", soft_wrap=True)
            console.print(Padding(Text(_shown(value), overflow="fold"), (0, 0, 0, 2)))
            console.print(Padding(Text(source, style="dim", overflow="fold"), (0, 0, 0, 2)))
    else:
        table = Table(title="Effective configuration", show_lines=False)
        longest = max((len(key) for key, _, _ in items), default=3)
        table.add_column("key", style="cyan", overflow="fold", min_width=min(longest, 40))
        table.add_column("value", overflow="fold", ratio=2)
        table.add_column("source", style="dim", overflow="fold", ratio=1)
        for key, value, source in items:
            table.add_row(key, Text(_shown(value)), Text(source))
        console.print(table)
    _exit_for(loaded, json_output)


@app.command("path")
def path(json_output: JsonOption = False) -> None:
    """Print the config files OLLM reads, in order, and whether each exists.

    With an invalid config it still prints them, then the error, and exits 3.

    Example: `ollm config path`
    """
    loaded = settings_despite_errors()
    rows = [{"path": str(p), "exists": p.is_file()} for p in loaded.files]
    if json_output:
        print_json({"home": str(ollm_home()), "files": rows})
    else:
        console.print(f"home: {escape(str(ollm_home()))}", soft_wrap=True)
        for row in rows:
            state = "[green]exists[/]" if row["exists"] else "[dim]absent[/]"
            console.print(f"{escape(str(row['path']))}  {state}", soft_wrap=True)
    _exit_for(loaded, json_output)


def _exit_for(loaded: LoadedSettings, json_output: bool) -> None:
    code = report_config_problems(loaded, as_json=json_output)
    if code:
        raise typer.Exit(code)
