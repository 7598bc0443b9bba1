"""worker/'s own import graph, read from the source (AST, every import, including those inside
functions): what tests/architecture/test_import_rules.py and
tests/architecture/test_module_reachability.py check."""

from __future__ import annotations

import ast
from pathlib import Path

WORKER = Path(__file__).resolve().parent.parent.parent / "worker"


def module_name(path: Path) -> str:
    parts = path.relative_to(WORKER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = WORKER.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports that never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(path: Path, *, runtime_only: bool = False) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts ``a.b`` when b is a module);
    ``runtime_only`` leaves out ``if TYPE_CHECKING:`` imports, which never execute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    skipped = _type_checking_blocks(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            for alias in node.names:
                if is_module(f"{base}.{alias.name}"):
                    found.add(f"{base}.{alias.name}")
    return found
