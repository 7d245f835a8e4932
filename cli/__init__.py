"""The ``ollm`` command line (typer, rich output, ``--json`` for scripts)."""
