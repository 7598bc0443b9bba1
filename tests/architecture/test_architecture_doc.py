"""docs/architecture.md names every room of worker/ (each sub-package and each top-level module)
in its rooms table and none that is gone; every sub-package states its job in its ``__init__``
docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "worker"
DOC = REPO / "docs" / "architecture.md"


def rooms_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## The rooms")
    return text[start : text.index("\n## ", start + 1)]


def rooms() -> set[str]:
    packages = {f"{p.name}/" for p in WORKER.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in WORKER.glob("*.py")}
    return packages | modules


def test_every_room_is_in_the_architecture_doc_and_none_that_is_gone() -> None:
    table = [line for line in rooms_section().splitlines() if line.startswith("| `")]
    named = {
        name for line in table for name in re.findall(r"`([\w]+/|[\w]+\.py)`", line.split(" | ")[0])
    }
    assert len(rooms()) > 10  # the walk found the package
    assert sorted(rooms() - named) == [], "rooms missing from docs/architecture.md"
    assert sorted(named - rooms()) == [], "docs/architecture.md names rooms that are gone"


def test_worker_has_few_top_level_modules() -> None:
    assert len(list(WORKER.glob("*.py"))) <= 12


def test_every_sub_package_states_its_job() -> None:
    silent = []
    for init in sorted(WORKER.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if not doc or len(doc.split()) < 8:
            silent.append(str(init.relative_to(REPO)))
    assert silent == []
