"""Settings shared by every command, loaded once per invocation."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ollm_cli.config.loader import LoadedSettings, load_settings

_trusted_for_run: list[bool] = []


@lru_cache(maxsize=8)
def _load(workspace: Path) -> LoadedSettings:
    return load_settings(workspace, trusted=True if _trusted_for_run else None)


@lru_cache(maxsize=8)
def _load_lenient(workspace: Path) -> LoadedSettings:
    return load_settings(workspace, trusted=True if _trusted_for_run else None, lenient=True)


def trust_for_this_run() -> None:
    """``--trust-workspace``: the workspace's config counts as trusted until the command ends."""
    _trusted_for_run.append(True)
    _load.cache_clear()
    _load_lenient.cache_clear()


def loaded_settings(workspace: Path | None = None) -> LoadedSettings:
    """The effective settings for ``workspace`` (the current folder by default)."""
    return _load((workspace or Path.cwd()).resolve())


def settings_despite_errors(workspace: Path | None = None) -> LoadedSettings:
    """The settings for the commands that must run with an invalid config (``config
    show``, ``config path``, ``service stop``, ``sessions doctor``): each invalid value
    left at its default, each error in ``.problems`` for :func:`report_config_problems`.
    """
    return _load_lenient((workspace or Path.cwd()).resolve())


def report_config_problems(loaded: LoadedSettings, *, as_json: bool = False) -> int:
    """Print each config error of a lenient load on stderr; the exit code it means
    (3 when there is one, else 0)."""
    from ollm_cli.cli.output import print_error

    for problem in loaded.problems:
        print_error(problem, as_json=as_json)
    return loaded.problems[0].exit_code if loaded.problems else 0


def warn_config_problems(loaded: LoadedSettings) -> None:
    """Print each config error of a lenient load as a warning (the command went on)."""
    from ollm_cli.cli.output import print_warning

    for problem in loaded.problems:
        print_warning(f"{problem.message}\n(the defaults were used in place of these values)")


def reset() -> None:
    """Forget loaded settings (tests change the environment between invocations)."""
    _load.cache_clear()
    _load_lenient.cache_clear()
    _trusted_for_run.clear()
