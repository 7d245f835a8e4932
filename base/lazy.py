"""Names a package re-exports, imported from their module when first used.

A package's ``__init__`` lists its public names and the private module of
each; ``lazy_exports`` gives it the module ``__getattr__`` (PEP 562) that
imports one on first access and keeps it. ``ollm --help`` then imports none
of the services, and ``ollm sessions list`` only the recording service.

Example::

    __getattr__ = lazy_exports(__name__, {"_store": ("ChatRecordingService",)})
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name of ``modules[m]`` lives in ``package.m``
    (or in ``m`` itself when ``m`` is a full module name, ``ollm_cli.base.redaction``)."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where_from = module if module.startswith("ollm_cli.") else f"{package}.{module}"
        # the import statement's machinery, not importlib.import_module: only it is
        # timed by ``python -X importtime``, which would otherwise hide these modules
        __import__(where_from)
        value = getattr(sys.modules[where_from], name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
