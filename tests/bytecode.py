"""Where the Python processes a test run starts keep their compiled bytecode.

With ``PYTHONDONTWRITEBYTECODE`` set (as in some CI images and sandboxes), no process
writes a ``.pyc``: every ``ollm`` command, service daemon and Ray worker the suite
starts compiled ollm_cli's modules from source again, about a fifth of the CPU time
of an in-process ``ollm run -p``. :func:`private_bytecode_cache` gives them one cache
for the run instead: a folder only this user can enter (``mkdtemp``: mode 0700, a name
nobody can guess, so nobody else can plant bytecode there), named by
``PYTHONPYCACHEPREFIX`` so that nothing is written beside the sources, and removed
when the process that made it exits. xdist's workers inherit the variables, so they
and everything they start share the folder.

"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import MutableMapping
from pathlib import Path


def private_bytecode_cache(environ: MutableMapping[str, str]) -> Path | None:
    """Replace ``PYTHONDONTWRITEBYTECODE`` in ``environ`` by a private
    ``PYTHONPYCACHEPREFIX`` for this run (see the module); ``None`` when bytecode is
    written anyway, or a cache folder is already named (by the user, or by the
    process that started this one)."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get("PYTHONPYCACHEPREFIX"):
        return None
    folder = Path(tempfile.mkdtemp(prefix="ollm-tests-pycache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    del environ["PYTHONDONTWRITEBYTECODE"]
    environ["PYTHONPYCACHEPREFIX"] = str(folder)
    return folder
