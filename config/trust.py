"""Workspace trust: which folders' ``.ollm/config.yaml`` may change security settings.

A cloned repository must not run code on the user's machine by shipping a
``.ollm/config.yaml`` with hooks, or loosen the approvals and the sandbox. Until
the user trusts a folder (``ollm trust PATH``), the loader ignores the keys of
:data:`RESTRICTED_KEYS` in that folder's configuration and warns, naming them.
Trusting a folder trusts the folders inside it.

The list lives in the user's own config folder (``$OLLM_HOME/trusted-folders.json``,
mode 0600), never in a workspace.

Example::

    trust_folder(Path("~/src/app"))
    is_trusted(Path("~/src/app/lib"))      # True
    untrust_folder(Path("~/src/app"))
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ollm_cli.config.paths import ensure_private_dir, ollm_home
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.errors import ConfigError

TRUST_FILE_NAME = "trusted-folders.json"
TRUST_ENV = "OLLM_TRUST_WORKSPACE"
"""Set to ``1`` by ``--trust-workspace``: the workspace is trusted for this run only."""

RESTRICTED_KEYS: tuple[str, ...] = (
    "hooks",
    "tools.approval",
    "tools.defaultApproval",
    "tools.sandbox",
    "services.environment",
    "services.session.redactSecrets",
    "services.session.dataDir",
    "snapshots.dataDir",
    "runtime.rayAddress",
    "provider.ollama.host",
    "provider.embedded.modelPath",
)
"""Keys (and their sub-keys) an untrusted workspace's configuration may not set: what
runs code, loosens a limit, moves data, or sends the conversation elsewhere (an
Ollama host on this machine is allowed)."""

USER_LEVEL_KEYS: tuple[str, ...] = ("tools.sandbox.denyRead", "tools.sandbox.allowRead")
"""Keys only the user's own file or environment may set, trusted workspace or not."""


class TrustList(BaseModel):
    """The trusted folders, as absolute resolved paths."""

    model_config = ConfigDict(defer_build=True)  # built when a list is read, not at import

    folders: list[str] = Field(default_factory=list)


def trust_file() -> Path:
    """Where the list of trusted folders is kept."""
    return ollm_home() / TRUST_FILE_NAME


def _canonical(path: Path) -> str:
    return str(path.expanduser().resolve())


def load_trusted() -> list[str]:
    """The trusted folders (an unreadable or corrupt list trusts nothing, loudly)."""
    path = trust_file()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ConfigError(
            f"cannot read the trusted folders list {path}: {error.strerror}",
            hint="check its permissions, or remove it and trust your folders again",
        ) from None
    try:
        return TrustList.model_validate(orjson.loads(raw)).folders
    except (orjson.JSONDecodeError, ValidationError):
        raise ConfigError(
            f"the trusted folders list {path} is damaged",
            hint="remove it and trust your folders again with `ollm trust PATH`",
        ) from None


def _save(folders: list[str]) -> None:
    ensure_private_dir(ollm_home())
    data = orjson.dumps(
        TrustList(folders=sorted(set(folders))).model_dump(), option=orjson.OPT_INDENT_2
    )
    write_atomic(trust_file(), data, mode=0o600)


def is_trusted(folder: Path, *, env: dict[str, str] | None = None) -> bool:
    """Whether ``folder`` (or a folder holding it) is trusted, or trusted for this run."""
    environ = os.environ if env is None else env
    if environ.get(TRUST_ENV, "") == "1":
        return True
    target = Path(_canonical(folder))
    return any(target.is_relative_to(Path(each)) for each in load_trusted())


def trust_folder(folder: Path) -> str:
    """Add ``folder`` to the trusted list; returns the path stored."""
    canonical = _canonical(folder)
    if not Path(canonical).is_dir():
        raise ConfigError(
            f"{canonical} is not a folder", hint="give the path of a project folder to trust"
        )
    if canonical == Path(canonical).anchor:
        raise ConfigError(
            "trusting the root folder would trust every folder on the machine",
            hint="trust each project folder on its own",
        )
    folders = load_trusted()
    if canonical not in folders:
        _save([*folders, canonical])
    return canonical


def untrust_folder(folder: Path) -> bool:
    """Remove ``folder`` from the list; False when it was not on it."""
    canonical = _canonical(folder)
    folders = load_trusted()
    if canonical not in folders:
        return False
    _save([f for f in folders if f != canonical])
    return True


def restricted(dotted: str, *, trusted: bool) -> bool:
    """Whether a workspace file may not set ``dotted`` (``tools.sandbox.network``)."""
    keys = USER_LEVEL_KEYS if trusted else RESTRICTED_KEYS + USER_LEVEL_KEYS
    return any(dotted == key or dotted.startswith(key + ".") for key in keys)
