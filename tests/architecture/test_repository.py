"""The repository holds only the project: no symbolic link leaves it (a worktree's link to
another checkout's virtualenv or cache, committed once, made a merge replace the real
directories). Links inside it are fine: the Helm chart's files/ link to the kustomize base, one
source of truth."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_no_tracked_symbolic_link_leaves_the_repository() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    staged = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert staged, "git ls-files found nothing: the check would pass vacuously"
    links = [line.split("\t", 1)[1] for line in staged if line.startswith("120000 ")]
    leaving = []
    for link in links:
        target = (REPO / link).parent / (REPO / link).readlink()
        if (
            not target.resolve().is_relative_to(REPO.resolve())
            or (REPO / link).readlink().is_absolute()
        ):
            leaving.append(link)
    assert leaving == []
