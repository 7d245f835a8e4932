"""The pipeline's packages take :func:`lazy_exports` from here (it lives in
:mod:`ollm_cli.base.lazy`, which ``config`` uses too)."""

from __future__ import annotations

from ollm_cli.base.lazy import lazy_exports

__all__ = ["lazy_exports"]
