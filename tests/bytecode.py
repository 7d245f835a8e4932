"""Where the Python processes a test run starts keep their compiled bytecode.

With ``PYTHONDONTWRITEBYTECODE`` set (as in some CI images and sandboxes), no process
writes a ``.pyc``: every ``ollm`` command, service daemon and Ray worker the suite
starts compiled ollm_cli's modules from source again, about a seventh of the CPU
time of an in-process ``ollm run -p`` (``python -m bench.test_processes``).
:func:`private_bytecode_cache` names one cache for them instead
(``PYTHONPYCACHEPREFIX``): ``$XDG_CACHE_HOME/ollm-tests/bytecode`` (else
``~/.cache/...``), a folder of the user's own, mode 0700, so nothing is written beside
the sources and nobody else can plant bytecode there. It is kept from run to run, as
``__pycache__`` folders are (Python checks each file against its source), and never
in ``/tmp``: a process that outlived a run and wrote into a removed ``/tmp`` folder
would recreate it where anyone can take the name first. xdist's workers inherit the
variables, so they and everything they start share it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import MutableMapping
from pathlib import Path


def bytecode_folder(environ: MutableMapping[str, str]) -> Path:
    """The cache folder for ``environ``'s user (see the module)."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")) / ".cache")
    return Path(cache).expanduser() / "ollm-tests" / "bytecode"


def private_bytecode_cache(environ: MutableMapping[str, str]) -> Path | None:
    """Replace ``PYTHONDONTWRITEBYTECODE`` in ``environ`` by a private
    ``PYTHONPYCACHEPREFIX`` (see the module); ``None``, and ``environ`` unchanged, when
    bytecode is written anyway, a cache folder is named already (by the user, or by the
    process that started this one), or the folder is not this user's alone."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get("PYTHONPYCACHEPREFIX"):
        return None
    folder = bytecode_folder(environ)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or stat.S_IMODE(info.st_mode) & 0o077
    ):
        return None
    del environ["PYTHONDONTWRITEBYTECODE"]
    environ["PYTHONPYCACHEPREFIX"] = str(folder)
    return folder
