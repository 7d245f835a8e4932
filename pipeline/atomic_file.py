"""Re-exports :mod:`ollm_cli.base.atomic_file` (files replaced whole, or not at all).

The module moved to the base package so that ``config`` needs nothing of
``pipeline``; this path stays for the modules (and branches in flight) that
import it. New code imports :mod:`ollm_cli.base.atomic_file`.
"""

from __future__ import annotations

from ollm_cli.base.atomic_file import create_new, fsync_dir, sibling_temp, write_atomic

__all__ = ["create_new", "fsync_dir", "sibling_temp", "write_atomic"]
