"""Command groups whose commands are imported only when they run.

A :class:`LazyGroup` lists its commands from a table of :class:`CommandSpec`
(name, module, one-line summary): ``--help`` and shell completion need
nothing else, and running a command imports its module alone. ``ollm`` and
``ollm sessions`` are such groups, so ``ollm sessions list`` does not import
the exporters, the importers of other tools or Ray.

Example::

    class SessionsGroup(LazyGroup):
        package = "ollm_cli.cli.sessions"
        table = {"list": CommandSpec("_list", "List recorded sessions.")}
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import typer
from typer._click.exceptions import UsageError
from typer.core import TyperCommand, TyperGroup

from ollm_cli.cli.help_pages import tidy

if TYPE_CHECKING:  # typer ships its own copy of click
    from typer._click.core import Command, Context


class CommandSpec(NamedTuple):
    """Where a command lives and the line its group's ``--help`` shows for it."""

    module: str
    """The module in the group's package."""
    summary: str
    """Its first help line (the tests check it matches the command's own)."""
    group: bool = False
    """The module's ``app`` is a group of subcommands; else its ``register`` adds commands."""


class LazyGroup(TyperGroup):
    """A group whose commands are listed from :attr:`table` and imported when run."""

    package: ClassVar[str]
    """The package holding the commands' modules."""
    table: ClassVar[dict[str, CommandSpec]]

    _summaries_only = False

    @classmethod
    def load_command(cls, name: str) -> Command | None:
        """The click command ``name``, importing its module now."""
        spec = cls.table.get(name)
        if spec is None:
            return None
        module: Any = importlib.import_module(f"{cls.package}.{spec.module}")
        if spec.group:
            group = typer.main.get_group(module.app)
            group.name = name
            return group
        holder = typer.Typer(rich_markup_mode="markdown")
        module.register(holder)
        return typer.main.get_group(holder).commands.get(name)

    def format_help(self, ctx: Context, formatter: Any) -> None:
        tidy(self, ctx)
        # the help page needs each command's name and summary, not the command
        self._summaries_only = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._summaries_only = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.table)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        spec = self.table.get(cmd_name)
        if spec is None:
            return None
        if ctx.resilient_parsing or self._summaries_only:
            return TyperCommand(cmd_name, help=spec.summary, short_help=spec.summary)
        command = self.load_command(cmd_name)
        if command is not None:
            tidy(command, ctx)
        return command

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as error:
            matches = get_close_matches(args[0], list(self.table), n=1) if args else []
            if matches and "Did you mean" not in error.message:
                error.message = f"No such command {args[0]!r}. Did you mean {matches[0]!r}?"
            raise
