"""The import rules of docs/architecture.md, enforced on the source (AST, every import,
including those inside functions).

Kafka and the inference runtime stay at the edges; the chunking rooms depend only downwards
(``text`` ← ``rules`` / ``embedding`` ← ``registry``/``strategies``); pure modules import no I/O.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORKER = Path(__file__).resolve().parent.parent / "worker"


def module_name(path: Path) -> str:
    parts = path.relative_to(WORKER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    base = WORKER.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts ``a.b`` when b is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    )
    found: set[str] = set()
    for node in ast.walk(tree):
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


MODULES = {module_name(p): imports_of(p) for p in sorted(WORKER.rglob("*.py"))}


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def offenders(
    importer_prefix: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()
) -> list[str]:
    bad = []
    for module, imported in MODULES.items():
        if not under(module, importer_prefix) or module in allowed:
            continue
        for name in sorted(imported):
            if any(under(name, f) for f in forbidden):
                bad.append(f"{module} imports {name}")
    return bad


IO = ("aiokafka", "onnxruntime", "onnx", "safetensors", "prometheus_client")
WORKER_SIDE = tuple(
    f"worker.{name}"
    for name in (
        "service", "consumer", "document", "kafka", "publisher", "cli", "config", "batcher",
        "pipeline", "metrics", "health", "records", "resolver", "codec", "events",
        "embedding.embedder", "embedding.runtime", "embedding.build",
    )
)  # fmt: skip

RULES = [
    # (who, may not import, exempt modules, why)
    ("worker.chunking", IO, (), "chunking is pure: no Kafka, no inference runtime, no metrics"),
    (
        "worker.chunking",
        WORKER_SIDE,
        (),
        "chunking reads nothing of the worker (only the model directory's layout, manifest.py)",
    ),
    (
        "worker.chunking.text",
        (
            "worker.chunking.rules",
            "worker.chunking.embedding",
            "worker.chunking.registry",
            "worker.chunking.strategies",
            "worker.chunking._native",
            "worker.embedding",
        ),
        (),
        "text analysis is the bottom room",
    ),
    (
        "worker.chunking.rules",
        (
            "worker.chunking.embedding",
            "worker.chunking.registry",
            "worker.chunking.strategies",
            "worker.embedding",
        ),
        (),
        "rule strategies need no model and know no registry",
    ),
    (
        "worker.chunking.embedding",
        (
            "worker.chunking.rules",
            "worker.chunking.registry",
            "worker.chunking.strategies",
            "worker.chunking._native",
        ),
        (),
        "embedding strategies share only text/ and types with the rule strategies",
    ),
    (
        "worker",
        ("aiokafka",),
        (
            "worker.kafka",
            "worker.consumer",
            "worker.unreadable",  # reads aiokafka's own tracebacks: part of the consumer edge
            "worker.publisher",
            "worker.document",
            "worker.service",
            "worker.cli",
        ),
        "Kafka stays at the edge",
    ),
    (
        "worker",
        ("onnxruntime", "onnx", "safetensors"),
        (
            "worker.embedding.embedder",
            "worker.embedding.build",
            "worker.embedding.graph",
            "worker.embedding.commands",
            "worker.embedding.encoder_passes",  # the encoder run for `model distill`
        ),
        "the inference runtime and the model build stay in embedding/",
    ),
]
PURE = ("worker.offsets", "worker.batch_policy", "worker.backpressure", "worker.records",
        "worker.errors", "worker.events", "worker.pipeline", "worker.resolver", "worker.codec",
        "worker.loop_lag")  # fmt: skip


@pytest.mark.parametrize(("who", "forbidden", "exempt", "why"), RULES, ids=[r[3] for r in RULES])
def test_import_rule(
    who: str, forbidden: tuple[str, ...], exempt: tuple[str, ...], why: str
) -> None:
    assert not offenders(who, forbidden, exempt), why


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io(module: str) -> None:
    io = (*IO, "tokenizers", "worker.kafka", "worker.consumer", "worker.service",
          "worker.publisher", "worker.health", "worker.embedding.embedder")  # fmt: skip
    bad = sorted(n for n in MODULES[module] if any(under(n, f) for f in io))
    assert not bad, f"{module} imports {bad}"


def test_only_kafka_py_constructs_kafka_clients() -> None:
    clients = {"AIOKafkaConsumer", "AIOKafkaProducer", "AIOKafkaAdminClient"}
    bad = []
    for path in sorted(WORKER.rglob("*.py")):
        if module_name(path) == "worker.kafka":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in clients:
                    bad.append(f"{module_name(path)}:{node.lineno} {name}(...)")
    assert not bad


def test_the_rules_see_the_imports() -> None:
    # The checker itself must find what is there, or every rule passes vacuously.
    assert "aiokafka" in MODULES["worker.kafka"]
    assert "worker.chunking._native" in MODULES["worker.chunking.rules.adaptive"]
    assert "worker.chunking.strategies" in MODULES["worker.chunking.registry"]  # in a function
    assert "onnxruntime" in MODULES["worker.embedding.embedder"]
