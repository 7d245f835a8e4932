"""Another local user, for the tests of attacks from a second account on the machine.

:func:`intruder` makes (once, with ``useradd``) a real unprivileged user and
returns it; where the machine does not allow it (not root, no ``useradd``)
the test asking for it is skipped with the reason. :meth:`Intruder.run` runs a
shell script as that user (``setpriv`` drops every privilege and group), so the
attacker's steps meet the kernel's real permission checks.

Example::

    user = intruder()
    user.run("mkdir -p /tmp/planted && echo x > /tmp/planted/file")
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

import pytest

NAME = "ollm-intruder"
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LC_ALL": "C"}


@dataclass(frozen=True)
class Intruder:
    """A second local user: its name, uid and gid."""

    name: str
    uid: int
    gid: int

    def command(self, *args: str) -> list[str]:
        """``args`` as a command line that runs as this user, with no privilege."""
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            *args,
        ]

    def run(self, script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``script`` with ``/bin/sh`` as this user, in ``/tmp``."""
        done = subprocess.run(
            self.command("/bin/sh", "-c", script),
            cwd="/tmp",
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"the intruder's script failed: {done.stderr}")
        return done


def intruder() -> Intruder:
    """The second local user, made when missing; skips the test where it cannot be."""
    if os.geteuid() != 0:
        pytest.skip("a second local user needs root to create (useradd) and to become")
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("useradd or setpriv is not installed: no second local user")
    try:
        entry = pwd.getpwnam(NAME)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0 and "already exists" not in made.stderr:
            pytest.skip(f"useradd could not create a second user: {made.stderr.strip()}")
        entry = pwd.getpwnam(NAME)
    return Intruder(NAME, entry.pw_uid, entry.pw_gid)
