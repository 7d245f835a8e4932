"""What ``config`` and ``pipeline`` both stand on, depending on neither.

- :mod:`ollm_cli.base.errors`: the exception hierarchy (each error with its exit
  code and a hint for the user);
- :mod:`ollm_cli.base.atomic_file`: files replaced whole or not at all;
- :mod:`ollm_cli.base.redaction` (with :mod:`ollm_cli.base.secret_literals`):
  the shapes of secrets, and their redaction from any text we show or keep.

Nothing here imports another package of ours; import-linter keeps it so.
"""
