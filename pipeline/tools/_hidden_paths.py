"""The hidden-path policy: what tool commands may not read, even read-only.

The OLLM home, the credential stores under each home folder, the files of ``/etc``
only root may read, and ``tools.sandbox.denyRead``, less ``tools.sandbox.allowRead``.

Example::

    hidden_paths(SandboxSettings(), [Path.home()], ollm_home())
    # [(PosixPath('/root/.ollm'), True), (PosixPath('/root/.ssh'), True), ...]
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

from ollm_cli.config.settings import SandboxSettings

#: Credential stores under a home folder that tool commands never see.
HIDDEN_IN_HOME: tuple[str, ...] = (
    ".ssh", ".gnupg", ".aws", ".config/gcloud", ".azure", ".kube", ".docker",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".yarnrc", ".config/gh",
    ".config/hub", ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
    ".terraform.d/credentials.tfrc.json", ".vault-token", ".pgpass", ".my.cnf",
    ".config/op", ".password-store", ".local/share/keyrings", ".config/rclone",
    ".s3cfg", ".boto", ".mozilla", ".config/google-chrome", ".config/chromium",
    ".bash_history", ".zsh_history", ".python_history", ".psql_history",
    ".mysql_history", ".config/git/credentials",
)  # fmt: skip
#: Folders of ``/etc`` whose files only root should read are looked at, one level deep.
_ROOT_ONLY_DIRS = ("/etc", "/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")


@functools.lru_cache(maxsize=1)
def root_only_files() -> tuple[str, ...]:
    """Files of ``/etc`` that other users may not read (``/etc/shadow``, host keys...)."""
    found: list[str] = []
    for folder in _ROOT_ONLY_DIRS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISLNK(info.st_mode) and not info.st_mode & 0o004:
                found.append(entry.path)
    return tuple(sorted(found))


def hidden_paths(
    settings: SandboxSettings, homes: list[Path], ollm_home_dir: Path
) -> list[tuple[Path, bool]]:
    """What tool commands may not read: ``(path, is_dir)`` of each that exists.

    The OLLM home, the credential stores under each home, root-only files, and
    ``tools.sandbox.denyRead``, less ``tools.sandbox.allowRead``.
    """
    wanted: list[Path] = [ollm_home_dir]
    for home in homes:
        wanted.extend(home / name for name in HIDDEN_IN_HOME)
    wanted.extend(Path(p) for p in root_only_files())
    wanted.extend(Path(p).expanduser() for p in settings.deny_read)
    allowed = {Path(p).expanduser().resolve() for p in settings.allow_read}
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()
    for path in wanted:
        try:
            real = path.resolve()
            info = real.stat()
        except (OSError, RuntimeError):
            continue
        if real in seen or real in allowed or real == Path(real.anchor):
            continue
        seen.add(real)
        out.append((real, stat.S_ISDIR(info.st_mode)))
    return out
