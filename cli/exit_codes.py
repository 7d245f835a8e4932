"""Exit codes of the ``ollm`` command, and the one place exceptions map to them.

=====  ===========================================================
code   meaning
=====  ===========================================================
0      success
1      an unexpected error (a bug: please report it)
2      wrong usage: an unknown option, a missing argument, or a message
       larger than the model's window (``ollm run --truncate-prompt`` cuts it)
3      invalid configuration (the message names the file and key)
4      a session could not be found, read, written or locked
5      a loop or a limit stopped the turn (``ollm run -p``, batch)
6      the model provider failed or could not be reached
7      a tool could not run (denied, bad arguments, no sandbox)
8      a pipeline actor died while serving the turn
130    interrupted by Ctrl-C
=====  ===========================================================
"""

from __future__ import annotations

from ollm_cli.pipeline.errors import OllmError

OK = 0
UNEXPECTED = 1
USAGE = 2
INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 ok, 2 usage, 3 config, 4 session, 5 loop or limit stopped the turn, "
    "6 provider, 7 tool, 8 actor failure, 130 interrupted, 1 unexpected."
)


def exit_code_for(error: BaseException) -> int:
    """The exit code for ``error`` (``OllmError`` subclasses carry their own)."""
    if isinstance(error, OllmError):
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    return UNEXPECTED
