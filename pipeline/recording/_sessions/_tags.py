"""Session tags typed by a user: checked, cleaned, kept once each."""

from __future__ import annotations

from ollm_cli.pipeline.errors import SessionError

MAX_TAG_LENGTH = 64


def check_tags(tags: list[str]) -> list[str]:
    """Tags typed by a user, each checked: not empty, no comma (tags are given one
    by one), printable, at most :data:`MAX_TAG_LENGTH` characters. Raises
    :class:`SessionError` naming the first bad tag; returns them cleaned, once each.

    >>> check_tags(["work", "  ci  ", "work"])
    ['work', 'ci']
    """
    for tag in tags:
        cleaned = " ".join(str(tag).split())
        shown = repr(str(tag)[:40])
        if not cleaned:
            raise SessionError("a tag cannot be empty", hint="give a word, such as `work`")
        if "," in cleaned:
            raise SessionError(
                f"the tag {shown} holds a comma",
                hint="give several tags as separate words: `ollm sessions tag ID work ci`",
            )
        if not cleaned.isprintable():
            raise SessionError(
                f"the tag {shown} holds control characters", hint="use printable text"
            )
        if len(cleaned) > MAX_TAG_LENGTH:
            raise SessionError(
                f"the tag {shown}... is {len(cleaned)} characters long",
                hint=f"a tag holds at most {MAX_TAG_LENGTH} characters",
            )
    return clean_tags(tags)


def clean_tags(tags: list[str]) -> list[str]:
    """The tags with their spaces folded, empty ones dropped, each kept once, in order."""
    out: list[str] = []
    for tag in tags:
        cleaned = " ".join(str(tag).split())
        if cleaned and cleaned not in out:
            out.append(cleaned)
    return out
