"""Stripping terminal control sequences from text that did not come from OLLM itself.

A title, a model's answer, a tool's output or an imported session may hold
escape sequences that clear the screen, retitle the window or write the
clipboard (OSC 52); it may also hold Unicode's bidirectional controls
(U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C), which make a terminal
show text in another order than it is (``cat \\u202etxt.exe`` shows ``cat exe.txt``).
:func:`strip_control` removes escape sequences whole, every other C0/C1 control
character but tab and newline, and the bidirectional controls; the CLI's
consoles and the Markdown export run all such text through it.

Example::

    strip_control("ok\\x1b]52;c;aGk=\\x07 \\x1b[2Jdone")   # 'ok done'
    strip_control("invoice\\u202efdp.exe")                   # 'invoicefdp.exe'
"""

from __future__ import annotations

import re

BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
"""Unicode's bidirectional controls, as the inside of a regular expression's class:
embeddings and overrides (U+202A-U+202E), isolates (U+2066-U+2069), the
left-to-right and right-to-left marks (U+200E, U+200F) and the Arabic letter mark
(U+061C)."""

# ESC-introduced sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings (up to BEL
# or ESC \\, an unterminated one to the end of its line), and two-character escapes;
# then their 8-bit C1 forms; then any other control character but tab and newline.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x9d\x98\x9e\x9f][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]"
)
_CONTROL_GATE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]")


def strip_control(text: str) -> str:
    """``text`` without escape sequences (CSI, OSC, DCS... removed whole), without
    any other control character but tab and newline, and without bidirectional
    controls."""
    if _CONTROL_GATE.search(text) is None:
        return text
    return _CONTROL.sub("", text)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character other than tab and newline, or a
    bidirectional control."""
    return _CONTROL_GATE.search(text) is not None
