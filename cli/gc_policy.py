"""The garbage collector of a short command: a warm ``ollm run -p``.

Such a command imports most of its code and builds the schemas and validators of
the settings and of the messages it uses as it starts, and keeps nearly all of it
until it exits. With the interpreter's default threshold (a young-generation pass
every 700 allocations, about seventy passes while it starts) the collector
traverses these objects again and again for nothing; at exit, the interpreter's
last passes traverse them once more only to free memory the operating system
takes back anyway. Together about a fifth of the client's CPU time.

:func:`collected_rarely` runs the command with a young-generation pass every
:data:`YOUNG_THRESHOLD` allocations (the garbage of a long turn is still
collected, in bounded batches), and leaves what is alive at exit to the operating
system (:func:`gc.freeze` from :mod:`atexit`: the interpreter's last passes skip
it). Nothing of the command's own is left to the collector at exit: files,
sockets and the service's connection are closed explicitly before.

Example::

    with collected_rarely():
        run_command(options)
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""Allocations between two young-generation passes while the command runs (the
interpreter's default is 700)."""


@contextmanager
def collected_rarely() -> Iterator[None]:
    """Run the block with :data:`YOUNG_THRESHOLD` (the previous thresholds are back
    after it), and have the interpreter skip the objects still alive at exit."""
    previous = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, *previous[1:])
    atexit.register(gc.freeze)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
