"""The state a session store shares with its helpers, each part in a class of its own.

:class:`~ollm_cli.pipeline.recording._store.ChatRecordingService` is the facade;
its recovery, retention and forks work on the same folder and the same open
sessions. They take these parts, never the facade: the folder with its paths,
locks and notices (:class:`SessionFolder`), the damaged files it sets aside
(:class:`DamagedFiles`) and the sessions open in it with their loading and
saving (:class:`OpenSessions`). Nothing here imports the facade.
"""

from __future__ import annotations

from ollm_cli.pipeline.recording._sessions._damaged import CORRUPT_MARK, DamagedFiles
from ollm_cli.pipeline.recording._sessions._folder import SessionFolder
from ollm_cli.pipeline.recording._sessions._open import OpenSession, OpenSessions
from ollm_cli.pipeline.recording._sessions._reasons import invalid_reason, os_reason
from ollm_cli.pipeline.recording._sessions._replay import rebuild_from_journal, replay
from ollm_cli.pipeline.recording._sessions._tags import MAX_TAG_LENGTH, check_tags, clean_tags

__all__ = [
    "CORRUPT_MARK",
    "MAX_TAG_LENGTH",
    "DamagedFiles",
    "OpenSession",
    "OpenSessions",
    "SessionFolder",
    "check_tags",
    "clean_tags",
    "invalid_reason",
    "os_reason",
    "rebuild_from_journal",
    "replay",
]
