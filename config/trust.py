"""Workspace trust: which folders' ``.ollm/config.yaml`` may change security settings.

A cloned repository must not run code on the user's machine by shipping a
``.ollm/config.yaml`` with hooks, loosen the approvals and the sandbox, send the
conversation, a key or telemetry to a server of its own, or expire the user's
history. Default deny: until the user trusts a folder (``ollm trust PATH``), the
loader keeps only the keys of :data:`ALLOWED_KEYS` from that folder's config (and
values that only tighten), ignores the rest and warns, naming them.

Trust is pinned to content, as ``direnv allow`` is: trusting a folder records the
digest of its config's restricted part (every key outside the allow list, with
its value) as the user saw it. When that part later differs, it is ignored again,
with a warning naming the keys that changed, until the user trusts the folder
again (``ollm trust PATH`` shows the difference). It is the folder's own file that
is trusted: a config inside one of its subfolders is not. Extensions installed
inside a trusted folder, or a folder inside it, are loaded (:func:`is_trusted`).

The list lives in the user's own config folder (``$OLLM_HOME/trusted-folders.json``,
mode 0600), never in a workspace; a list written before pins existed is read, and
its folders' restricted keys wait for a review.

Example::

    trust_folder(Path("~/src/app"))                  # pins ~/src/app/.ollm/config.yaml
    is_trusted(Path("~/src/app/lib"))                # True (for extensions)
    workspace_trust(Path("~/src/app"), {"hooks": [...]}).state   # "changed" if it did
    untrust_folder(Path("~/src/app"))
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ollm_cli.base.atomic_file import write_atomic
from ollm_cli.base.errors import ConfigError
from ollm_cli.config.paths import check_home, ensure_private_dir, ollm_home

TRUST_FILE_NAME = "trusted-folders.json"
TRUST_ENV = "OLLM_TRUST_WORKSPACE"
"""Set to ``1`` by ``--trust-workspace``: the workspace is trusted for this run only."""

ALLOWED_KEYS: tuple[str, ...] = (
    "services.compression.enabled",
    "services.compression.threshold",
    "services.compression.strategy",
    "services.compression.preserveRecent",
    "services.compression.summaryMaxTokens",
    "services.compression.responseReserve",
    "services.compression.maxFailures",
    "services.loopDetection.maxTurns",
    "services.loopDetection.repeatThreshold",
    "services.loopDetection.outputSimilarity",
    "services.loopDetection.maxCyclePeriod",
    "services.loopDetection.onDetect",
    "services.loopDetection.pollThreshold",
    "services.loopDetection.pollIntervalS",
    "services.fileDiscovery.maxDepth",
    "services.fileDiscovery.builtinIgnores",
    "services.fileDiscovery.maxFiles",
    "services.context",
    "snapshots.enabled",
    "snapshots.maxCount",
    "snapshots.autoCreate",
    "snapshots.autoThreshold",
    "provider.model",
    "provider.thinking",
    "provider.ollama.timeout",
    "provider.ollama.defaultContextWindow",
    "provider.openai.timeout",
    "provider.openai.contextWindow",
    "provider.openai.defaultContextWindow",
    "provider.embedded.maxTokens",
    "provider.embedded.seed",
    "provider.embedded.temperature",
    "provider.simulated",
)
"""Keys (and their sub-keys) any workspace's configuration may set: how the conversation
is compressed, watched for loops, given context and snapshotted, which model answers
and how long it may take. Nothing here names an endpoint, a key, a variable to read, a
folder to read or write, what runs, what is kept or for how long."""

RESTRICTED_KEYS: tuple[str, ...] = (
    "hooks",
    "tools",
    "services.environment",
    "services.session",
    "services.fileDiscovery.followSymlinks",
    "services.fileDiscovery.scanTimeS",
    "services.loopDetection.enabled",
    "services.compression.finishOnExitS",
    "snapshots.dataDir",
    "checkpoints",
    "runtime",
    "provider.name",
    "provider.ollama.host",
    "provider.ollama.maxContextWindow",
    "provider.openai.baseUrl",
    "provider.openai.apiKeyEnv",
    "provider.openai.maxContextWindow",
    "provider.embedded.modelPath",
    "provider.embedded.contextWindow",
    "provider.embedded.threads",
    "telemetry",
)
"""Keys (and their sub-keys) only the user's own file, the environment or a trusted
workspace may set: what runs code, loosens a limit, reads a variable, moves or expires
data, sends the conversation (or its telemetry) elsewhere, or costs the machine more.
An untrusted workspace may still set them to a value that only tightens (a stricter
approval, a smaller limit), never to another endpoint: no host or URL key at all, not
even one that looks local (``http://127.attacker.example`` is a name like any other).

A key on neither list is treated as restricted (default deny); a test fails when
a key of the settings model is on neither."""

LOWER_ONLY_KEYS: tuple[str, ...] = (
    "tools.sandbox",
    "services.fileDiscovery.scanTimeS",
    "services.compression.finishOnExitS",
    "provider.ollama.maxContextWindow",
    "provider.openai.maxContextWindow",
    "provider.embedded.contextWindow",
    "provider.embedded.threads",
)
"""Numeric restricted keys an untrusted workspace may lower (never raise)."""

USER_LEVEL_KEYS: tuple[str, ...] = ("tools.sandbox.denyRead", "tools.sandbox.allowRead")
"""Keys only the user's own file or environment may set, trusted workspace or not."""

USER_LEVEL_HOOK_KEYS: tuple[str, ...] = ("sandbox",)
"""Keys of one hook (``hooks[0].sandbox``) only the user's own file or environment may
set: a workspace's hook runs in the tool sandbox, trusted or not, since what it runs
(``sh scripts/welcome.sh``, ``make``) is a file any tool, teammate or ``git pull`` may
change after the config was trusted."""


def _under(dotted: str, keys: tuple[str, ...]) -> bool:
    return any(dotted == key or dotted.startswith(key + ".") for key in keys)


@lru_cache(maxsize=1024)
def canonical_key(dotted: str) -> str | None:
    """``dotted`` with each segment spelt as the file's camelCase key, or ``None`` when it
    names no setting. pydantic also accepts a field's Python name (``data_dir``), so a
    check of the camelCase spelling alone could be walked around.

    >>> canonical_key("services.session.data_dir")
    'services.session.dataDir'
    >>> canonical_key("tools.approval.shell")
    'tools.approval.shell'
    >>> canonical_key("services.sesion") is None
    True
    """
    from ollm_cli.config.settings import OllmSettings

    model: type[BaseModel] | None = OllmSettings
    parts = dotted.split(".")
    keys: list[str] = []
    for index, segment in enumerate(parts):
        if model is None:  # inside a mapping of free keys (``tools.approval.shell``)
            return ".".join([*keys, *parts[index:]])
        match = None
        for name, info in model.model_fields.items():
            if segment in (name, info.alias):
                match = (info.alias or name, info.annotation)
                break
        if match is None:
            return None
        keys.append(match[0])
        annotation = match[1]
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return ".".join(keys)


def restricted(dotted: str, *, trusted: bool) -> bool:
    """Whether a workspace file may not set ``dotted`` (``tools.sandbox.network``).

    Default deny: an untrusted workspace may set only the keys of :data:`ALLOWED_KEYS`.
    A key that names no setting is left to validation, which names it as a typo.
    """
    key = canonical_key(dotted)
    if key is None:
        return False
    if _under(key, USER_LEVEL_KEYS):
        return True
    return not trusted and not _under(key, ALLOWED_KEYS)


def workspace_hooks(hooks: Any) -> tuple[Any, list[str]]:
    """A workspace config's ``hooks`` without the keys only the user may set
    (:data:`USER_LEVEL_HOOK_KEYS`), and those keys by name (``hooks[0].sandbox``).
    ``sandbox: true`` says what holds anyway and is kept; anything else is not a list of
    hooks and is left to validation.

    >>> workspace_hooks([{"event": "session:start", "command": "make", "sandbox": False}])
    ([{'event': 'session:start', 'command': 'make'}], ['hooks[0].sandbox'])
    """
    if not isinstance(hooks, list):
        return hooks, []
    kept: list[Any] = []
    ignored: list[str] = []
    for index, hook in enumerate(hooks):
        if isinstance(hook, Mapping):
            dropped = [k for k in USER_LEVEL_HOOK_KEYS if k in hook and hook[k] is not True]
            hook = {k: v for k, v in hook.items() if k not in dropped}
            ignored.extend(f"hooks[{index}].{key}" for key in dropped)
        kept.append(hook)
    return kept, ignored


def lower_only(dotted: str) -> bool:
    """Whether ``dotted`` is a numeric limit an untrusted workspace may lower."""
    return _under(dotted, LOWER_ONLY_KEYS)


class PinnedKey(BaseModel):
    """One restricted key as the user trusted it."""

    model_config = ConfigDict(defer_build=True)  # built when a list is read, not at import

    digest: str
    """SHA-256 of the value's canonical JSON."""
    shown: str
    """The value as it was shown to the user, secrets masked (for the difference)."""


class TrustPin(BaseModel):
    """The restricted part of a folder's ``.ollm/config.yaml`` when it was trusted."""

    model_config = ConfigDict(defer_build=True)  # built when a list is read, not at import

    digest: str
    """SHA-256 of the canonical JSON of every restricted key and its value."""
    keys: dict[str, PinnedKey] = Field(default_factory=dict)


class TrustList(BaseModel):
    """The trusted folders, as absolute resolved paths, and what each one's config held.

    A list written before pins existed has ``folders`` only: its folders still count for
    extensions installed inside them, but their config's restricted keys wait for the
    user to review them again (``ollm trust PATH``).
    """

    model_config = ConfigDict(defer_build=True)  # built when a list is read, not at import

    folders: list[str] = Field(default_factory=list)
    pins: dict[str, TrustPin] = Field(default_factory=dict)


def trust_file() -> Path:
    """Where the list of trusted folders is kept."""
    return ollm_home() / TRUST_FILE_NAME


def _canonical(path: Path) -> str:
    return str(path.expanduser().resolve())


def _read_list() -> TrustList:
    """The trusted folders list (an unreadable or corrupt list trusts nothing, loudly; one
    in a home that is not the user's alone is refused: :func:`check_home`)."""
    check_home()
    path = trust_file()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return TrustList()
    except OSError as error:
        raise ConfigError(
            f"cannot read the trusted folders list {path}: {error.strerror}",
            hint="check its permissions, or remove it and trust your folders again",
        ) from None
    try:
        return TrustList.model_validate(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValidationError):
        raise ConfigError(
            f"the trusted folders list {path} is damaged",
            hint="remove it and trust your folders again with `ollm trust PATH`",
        ) from None


def load_trusted() -> list[str]:
    """The trusted folders."""
    return _read_list().folders


def _save(trust: TrustList) -> None:
    ensure_private_dir(ollm_home())
    kept = sorted(set(trust.folders))
    pins = {folder: pin for folder, pin in sorted(trust.pins.items()) if folder in kept}
    data = orjson.dumps(TrustList(folders=kept, pins=pins).model_dump(), option=orjson.OPT_INDENT_2)
    write_atomic(trust_file(), data, mode=0o600)


def is_trusted(folder: Path, *, env: dict[str, str] | None = None) -> bool:
    """Whether ``folder`` (or a folder holding it) is trusted, or trusted for this run.

    This is trust by place, for extensions installed inside a folder; what a folder's
    own config may set is :func:`workspace_trust`'s, pinned to the file's content.
    """
    environ = os.environ if env is None else env
    if environ.get(TRUST_ENV, "") == "1":
        return True
    target = Path(_canonical(folder))
    return any(target.is_relative_to(Path(each)) for each in load_trusted())


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _shown(value: Any) -> str:
    from ollm_cli.config.masking import mask_secrets

    return mask_secrets(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())


def pin_of(restricted_part: Mapping[str, Any]) -> TrustPin:
    """The pin of a config's restricted part (``{"hooks": [...], "tools.sandbox.network":
    true}``): one digest for the whole, one per key for the difference."""
    return TrustPin(
        digest=_digest(dict(restricted_part)),
        keys={
            key: PinnedKey(digest=_digest(value), shown=_shown(value))
            for key, value in sorted(restricted_part.items())
        },
    )


class KeyChange(BaseModel):
    """One restricted key that differs from what was trusted."""

    model_config = ConfigDict(defer_build=True)  # built when a list is read, not at import

    key: str
    was: str | None
    """The trusted value (masked), ``None`` when the key is new."""
    now: str | None
    """The value in the file (masked), ``None`` when the key was removed."""


def difference(old: TrustPin | None, new: TrustPin) -> list[KeyChange]:
    """The restricted keys added, changed or removed since ``old`` was trusted."""
    before = old.keys if old is not None else {}
    changes = []
    for key in sorted(set(before) | set(new.keys)):
        was, now = before.get(key), new.keys.get(key)
        if was is None or now is None or was.digest != now.digest:
            changes.append(
                KeyChange(
                    key=key,
                    was=was.shown if was is not None else None,
                    now=now.shown if now is not None else None,
                )
            )
    return changes


TrustState = Literal["trusted", "untrusted", "changed", "unpinned"]


@dataclass(frozen=True)
class WorkspaceTrust:
    """Whether a workspace's config may set its restricted keys, and if not, why."""

    state: TrustState
    changed: tuple[str, ...] = ()
    """The restricted keys that differ from what was trusted (state ``changed``)."""

    @property
    def trusted(self) -> bool:
        return self.state == "trusted"


def workspace_trust(
    folder: Path, restricted_part: Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> WorkspaceTrust:
    """Whether the config of ``folder`` may set ``restricted_part``: the folder itself
    (not a folder holding it: a tool may write a config into a subfolder) was trusted
    with exactly these restricted keys and values, or is trusted for this run."""
    environ = os.environ if env is None else env
    if environ.get(TRUST_ENV, "") == "1":
        return WorkspaceTrust("trusted")
    canonical = _canonical(folder)
    trust = _read_list()
    if canonical not in trust.folders:
        return WorkspaceTrust("untrusted")
    pinned = trust.pins.get(canonical)
    if pinned is None:
        if not restricted_part:
            return WorkspaceTrust("trusted")
        return WorkspaceTrust("unpinned", tuple(sorted(restricted_part)))
    if pinned.digest == _digest(dict(restricted_part)):
        return WorkspaceTrust("trusted")
    changes = difference(pinned, pin_of(restricted_part))
    return WorkspaceTrust("changed", tuple(c.key for c in changes))


@dataclass(frozen=True)
class TrustReview:
    """What ``ollm trust PATH`` is about to trust, and how it differs from before."""

    folder: str
    pin: TrustPin
    previous: TrustPin | None
    was_trusted: bool

    @property
    def changes(self) -> list[KeyChange]:
        return difference(self.previous, self.pin)


def _check_folder(canonical: str) -> None:
    if not Path(canonical).is_dir():
        raise ConfigError(
            f"{canonical} is not a folder", hint="give the path of a project folder to trust"
        )
    if canonical == Path(canonical).anchor:
        raise ConfigError(
            "trusting the root folder would trust every folder on the machine",
            hint="trust each project folder on its own",
        )


def review_trust(folder: Path) -> TrustReview:
    """Read ``folder``'s config now: the restricted part that trusting it would pin."""
    from ollm_cli.config.loader import workspace_restricted_part

    canonical = _canonical(folder)
    _check_folder(canonical)
    trust = _read_list()
    return TrustReview(
        folder=canonical,
        pin=pin_of(workspace_restricted_part(Path(canonical))),
        previous=trust.pins.get(canonical),
        was_trusted=canonical in trust.folders,
    )


def trust_folder(folder: Path, review: TrustReview | None = None) -> str:
    """Trust ``folder`` with its config's restricted part as ``review`` read it (read now
    by default); returns the path stored."""
    review = review or review_trust(folder)
    trust = _read_list()
    if review.folder not in trust.folders:
        trust.folders.append(review.folder)
    trust.pins[review.folder] = review.pin
    _save(trust)
    return review.folder


def untrust_folder(folder: Path) -> bool:
    """Remove ``folder`` from the list; False when it was not on it."""
    canonical = _canonical(folder)
    trust = _read_list()
    if canonical not in trust.folders:
        return False
    trust.folders.remove(canonical)
    trust.pins.pop(canonical, None)
    _save(trust)
    return True
