"""The repository holds only the project: no symbolic links (a worktree's link to another
checkout's virtualenv or cache, committed once, made a merge replace the real directories)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_no_symbolic_links_are_tracked() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    staged = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert staged, "git ls-files found nothing: the check would pass vacuously"
    links = [line.split("\t", 1)[1] for line in staged if line.startswith("120000 ")]
    assert links == []
