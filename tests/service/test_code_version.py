"""The version a client and the service compare: a checkout whose sources changed is
another version (the service refuses a client of another version, and restarts when
idle), whatever changed: a file written, added, removed or renamed."""

from __future__ import annotations

import os
from pathlib import Path

from ollm_cli.pipeline.service._state import code_version, source_digest


def _tree(root: Path) -> Path:
    for name in ("cli/run.py", "pipeline/service/_client.py", "pipeline/records.py"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
    (root / "pipeline" / "notes.txt").write_text("not source\n")
    return root


def test_every_change_to_a_source_file_is_another_digest(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    packages = ("cli", "pipeline")
    first = source_digest(root, packages)
    assert source_digest(root, packages) == first  # nothing changed, the same

    (root / "pipeline" / "notes.txt").write_text("other notes, not source\n")
    assert source_digest(root, packages) == first

    client = root / "pipeline" / "service" / "_client.py"
    client.write_text("# edited\n")  # another size
    edited = source_digest(root, packages)
    assert edited != first

    before = client.stat()
    client.write_text("# EDITED\n")  # the same size, written later
    os.utime(client, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert source_digest(root, packages) not in {first, edited}

    seen = {source_digest(root, packages)}
    (root / "cli" / "added.py").write_text("")
    seen.add(source_digest(root, packages))
    (root / "cli" / "added.py").rename(root / "cli" / "renamed.py")
    seen.add(source_digest(root, packages))
    (root / "cli" / "renamed.py").unlink()
    assert source_digest(root, packages) in seen  # back to before it was added
    assert len(seen) == 3


def test_a_linked_file_counts_as_its_target(tmp_path: Path) -> None:
    """An editable install links each file of the checkout: its edits count."""
    checkout = _tree(tmp_path / "checkout")
    installed = tmp_path / "installed"
    for source in checkout.rglob("*.py"):
        link = installed / source.relative_to(checkout)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source)
    assert source_digest(installed, ("cli", "pipeline")) == source_digest(
        checkout, ("cli", "pipeline")
    )
    before = source_digest(installed, ("cli",))
    (checkout / "cli" / "run.py").write_text("# a longer edit of the checkout\n")
    assert source_digest(installed, ("cli",)) != before


def test_the_version_is_the_package_version_and_the_digest() -> None:
    version, _, digest = code_version().partition("+")
    assert version and len(digest) == 10
    assert int(digest, 16) >= 0
