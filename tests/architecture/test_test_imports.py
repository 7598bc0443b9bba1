"""How tests import each other: a test takes what it shares from ``tests.support`` (or a conftest
fixture by name), never from another test module, and no test imports ``bench/``.

A helper inside a test module, or a test folder's own helper module, is found by a reader only
by accident and ties one test's edit to another's failure; tests/support is where shared parts
live. The exceptions, each for a reason:

- ``tests/bench/`` tests the benchmarks' own instruments (the CPU sampler, the retrieval
  metrics): their subject is in bench/support, so they import it;
- ``tests/contract/`` keeps its harness (``tests.contract.capture``) beside the golden it
  captured, as it was when the golden was made.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

# (folder under tests/, module prefix it may import besides tests.support)
EXCEPTIONS = {
    "contract": ("tests.contract.capture",),
    "bench": ("bench.support",),
}


def module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``tree``, at any depth (an import inside
    a function counts the same); ``from X import name`` yields ``X.name``, which is ``X``'s
    submodule when there is one."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def allowed(importer: str, name: str) -> bool:
    top = name.split(".")[0]
    if top not in ("tests", "bench"):
        return True
    if name == "tests.support" or name.startswith("tests.support."):
        return True
    folder = importer.split(".")[1] if importer.count(".") >= 2 else ""
    return any(
        name == prefix or name.startswith(prefix + ".") for prefix in EXCEPTIONS.get(folder, ())
    )


def violations(source: str, path: Path) -> list[str]:
    module = module_of(path)
    tree = ast.parse(source)
    return [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for line, name in imported(tree, module, path.name == "__init__.py")
        if not allowed(module, name)
    ]


def test_no_test_imports_another_test_module_or_bench() -> None:
    found: list[str] = []
    checked = 0
    for path in sorted(TESTS.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        checked += 1
        found += violations(path.read_text(encoding="utf-8"), path)
    assert checked > 100  # the walk saw the suite
    assert found == [], "import shared parts from tests.support:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_import_it_forbids() -> None:
    path = TESTS / "state" / "test_example.py"
    source = "\n".join(
        [
            "from tests.broker.test_worker_kafka import run",
            "import tests.conftest",
            "from tests.state import helpers",
            "from . import neighbour",
            "def f():",
            "    from bench.support.process_cpu import CpuSampler",
            "from tests.support.texts import any_text",
            "from tests.support import kafka_io",
            "import worker.app",
        ]
    )
    assert [v.rsplit(" ", 1)[-1] for v in violations(source, path)] == [
        "tests.broker.test_worker_kafka.run",
        "tests.conftest",
        "tests.state.helpers",
        "tests.state.neighbour",
        "bench.support.process_cpu.CpuSampler",
    ]


def test_the_exceptions_hold_only_in_their_own_folder() -> None:
    bench_import = "from bench.support.process_cpu import CpuSampler"
    assert violations(bench_import, TESTS / "bench" / "test_example.py") == []
    assert violations(bench_import, TESTS / "runtime" / "test_example.py") != []
    assert violations("import bench.e2e_bench", TESTS / "bench" / "test_example.py") != []
    capture = "from tests.contract import capture"
    assert violations(capture, TESTS / "contract" / "test_example.py") == []
    assert violations(capture, TESTS / "broker" / "test_example.py") != []
