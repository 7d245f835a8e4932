"""``ollm config``: what configuration is in effect, and where it came from."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from ollm_cli.cli.output import console, print_json
from ollm_cli.cli.state import loaded_settings
from ollm_cli.config.loader import effective_items
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


def redacted_value(key: str, value: Any) -> Any:
    """``value`` with every secret masked: token shapes, passwords in URLs, tokens in
    hook commands, and the whole value of a key whose name is a credential's."""
    from ollm_cli.pipeline.environment import redact, secret_name_word

    if isinstance(value, str):
        last = key.rsplit(".", 1)[-1]
        if value and secret_name_word(last) is not None:
            return "[REDACTED]"
        return redact(value)
    if isinstance(value, list):
        return [redacted_value(key, item) for item in value]
    if isinstance(value, dict):
        return {k: redacted_value(f"{key}.{k}", v) for k, v in value.items()}
    return value


@app.command("show")
def show(json_output: JsonOption = False) -> None:
    """Print every setting in effect and the layer that set it (secrets masked).

    Example: `ollm config show --json | jq '.[] | select(.source != "default")'`
    """
    loaded = loaded_settings()
    items = [(k, redacted_value(k, v), source) for k, v, source in effective_items(loaded)]
    if json_output:
        print_json([{"key": k, "value": v, "source": s} for k, v, s in items])
        return
    table = Table(title="Effective configuration", show_lines=False)
    table.add_column("key", style="cyan", no_wrap=True)
    table.add_column("value")
    table.add_column("source", style="dim")
    for key, value, source in items:
        table.add_row(key, escape(_shown(value)), escape(source))
    console.print(table)


@app.command("path")
def path(json_output: JsonOption = False) -> None:
    """Print the config files OLLM reads, in order, and whether each exists.

    Example: `ollm config path`
    """
    loaded = loaded_settings()
    rows = [{"path": str(p), "exists": p.is_file()} for p in loaded.files]
    if json_output:
        print_json({"home": str(ollm_home()), "files": rows})
        return
    console.print(f"home: {escape(str(ollm_home()))}")
    for row in rows:
        state = "[green]exists[/]" if row["exists"] else "[dim]absent[/]"
        console.print(f"{escape(str(row['path']))}  {state}")
