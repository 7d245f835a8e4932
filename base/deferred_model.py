"""A pydantic model whose validator is built at its first use, safely from many threads.

``defer_build=True`` keeps ``ollm --help`` from building every model at import;
the model is built by ``model_rebuild()`` the first time it validates or dumps.
Pydantic's ``model_rebuild()`` is not thread-safe: when two threads first use a
model at once (the recording actor serves calls on several threads), the
second can enter it while the first is finishing, delete the validator and
serializer the first just built, and leave the class without its own for the
time of its rebuild. A third use then falls through to the parent class's
serializer: ``Session.model_dump()`` gave ``{}``, and a new session document
had no ``sessionId`` (a ``KeyError('sessionId')`` ended a batch conversation).

:class:`DeferredModel` builds each model once, under one process-wide
reentrant lock (building one model builds the models it holds, in the same
thread); once built, a model never takes the lock again.

Example::

    class Record(DeferredModel):
        model_config = ConfigDict(defer_build=True)
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict

_build_lock = threading.RLock()


class DeferredModel(BaseModel):
    """A model built at its first use, by one thread at a time (see the module)."""

    # itself too: built at import, it was the one model a warm `ollm run -p` built
    model_config = ConfigDict(defer_build=True)

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        """Pydantic's ``model_rebuild``, never run by two threads at once."""
        if cls.__pydantic_complete__ and not force:
            return None
        with _build_lock:
            return super().model_rebuild(
                force=force,
                raise_errors=raise_errors,
                # one frame more than pydantic counts: this override's
                _parent_namespace_depth=(
                    _parent_namespace_depth + 1 if _parent_namespace_depth > 0 else 0
                ),
                _types_namespace=_types_namespace,
            )


__all__ = ["DeferredModel"]
