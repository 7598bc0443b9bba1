"""docs/architecture.md lists every module of worker/ in its rooms, by its path relative to
worker/, and lists none that is gone."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"


def rooms_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## The rooms")
    return text[start : text.index("\n## ", start + 1)]


def test_every_module_is_in_the_architecture_doc_and_none_that_is_gone() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", rooms_section()))
    modules = {str(p.relative_to(REPO / "worker")) for p in (REPO / "worker").rglob("*.py")}
    assert len(modules) > 50  # the walk found the package
    assert sorted(modules - named) == [], "modules missing from docs/architecture.md"
    assert sorted(named - modules) == [], "docs/architecture.md lists modules that are gone"
