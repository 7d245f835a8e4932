"""Session ids are checked in one place before they name a file or folder."""

from __future__ import annotations

import pytest

from ollm_cli.pipeline.errors import InvalidSessionIdError
from ollm_cli.pipeline.recording import canonical_id, checked_id

SID = "0b0e5d4c-2f55-4e43-9a53-0c8d6f0e4a11"


def test_a_program_made_id_is_taken_as_it_is_and_nothing_else_is() -> None:
    assert checked_id(SID) == SID
    for bad in ("../x", SID.upper(), "not-a-uuid", SID + "/..", "", SID[:8]):
        with pytest.raises(InvalidSessionIdError):
            checked_id(bad)


def test_what_a_user_types_is_normalised_first() -> None:
    assert canonical_id(" " + SID.upper()) == SID
    with pytest.raises(InvalidSessionIdError):
        canonical_id("../../etc/passwd")
