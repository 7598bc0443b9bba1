"""Every module under worker/ is used by the product: reachable from the package's roots over
worker's own imports. A module that only tests or benchmarks import belongs in tests/support/
(or the benchmarks), not in the package that ships.

The roots are where the product is entered: the package ``__init__`` of every package (importing
any module imports its packages), ``__main__`` modules (``python -m``), and the modules named by
pyproject's entry points (``[project.scripts]``). From there the edges are the imports that run
(AST, inside functions too; ``if TYPE_CHECKING:`` imports never run and are not edges) and the
modules loaded by name: a string constant that names a module of worker/, whole
(``"worker.app"``) or under the package of the module holding it (``"semantic.sdpm"`` in
``worker.chunking``'s table of lazy names), which is how the public surfaces import on first use.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping, Set
from pathlib import Path

from tests.support.import_graph import WORKER, imports_of, module_name

PYPROJECT = WORKER.parent / "pyproject.toml"


def package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def edges(paths: list[Path]) -> dict[str, set[str]]:
    """Module → the modules of worker/ it imports at run time or loads by name."""
    modules = {module_name(p) for p in paths}
    found: dict[str, set[str]] = {}
    for path in paths:
        name = module_name(path)
        out = {m for m in imports_of(path, runtime_only=True) if m in modules}
        package = package_of(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out |= {c for c in (node.value, f"{package}.{node.value}") if c in modules}
        out.discard(name)
        found[name] = out
    return found


def roots(paths: list[Path], pyproject: Mapping[str, object]) -> set[str]:
    """Package ``__init__``s, ``__main__`` modules and the entry points' modules."""
    scripts = pyproject.get("project", {})
    assert isinstance(scripts, dict)
    entry = {target.partition(":")[0] for target in scripts.get("scripts", {}).values()}
    return entry | {module_name(p) for p in paths if p.name in ("__init__.py", "__main__.py")}


def unreachable(graph: Mapping[str, Set[str]], start: Set[str]) -> list[str]:
    """The modules of ``graph`` that no path from ``start`` reaches (importing a module
    imports its parent packages too)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen or name not in graph:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += graph[name]
    return sorted(set(graph) - seen)


def test_every_module_under_worker_is_reached_from_the_roots() -> None:
    paths = sorted(WORKER.rglob("*.py"))
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    start = roots(paths, pyproject)
    assert "worker.cli" in start  # the `chunkstream` command
    assert unreachable(edges(paths), start) == [], (
        "imported by no module of worker/ (move test-only code to tests/support/, "
        "bench-only code to bench/)"
    )


def test_the_walk_finds_what_nothing_reaches() -> None:
    graph = {
        "worker": {"worker.app"},
        "worker.app": {"worker.room.used"},
        "worker.room": set(),
        "worker.room.used": set(),
        "worker.room.only_tests_use_me": {"worker.room.used"},
        "worker.other": set(),
        "worker.other.lazy": set(),
    }
    assert unreachable(graph, {"worker"}) == [
        "worker.other",
        "worker.other.lazy",
        "worker.room.only_tests_use_me",
    ]


def test_the_edges_see_imports_and_names() -> None:
    """The real package: a plain import, one inside a function, and the lazy tables of names
    (absolute in ``worker``, relative in ``worker.chunking``) are all edges."""
    graph = edges(sorted(WORKER.rglob("*.py")))
    assert "worker.chunking.strategies" in graph["worker.chunking.registry"]
    assert "worker.inference.serving" in graph["worker.cli.chunking"]  # inside a function
    assert "worker.app" in graph["worker"]  # "Worker": "worker.app"
    assert "worker.chunking.semantic.sdpm" in graph["worker.chunking"]  # "semantic.sdpm"
