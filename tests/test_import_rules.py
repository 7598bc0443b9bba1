"""The import rules of docs/architecture.md, enforced on the source (AST, every import,
including those inside functions).

Kafka and the inference runtime stay at the edges; the chunking rooms depend only downwards
(``text`` ← ``rules`` / ``semantic`` ← ``contract`` ← ``strategies`` ← ``registry``); the two model
rooms are the run-time contract at the bottom (``models``) and the offline model making above
it (``model_making``); pure modules import no I/O; and nothing in ``worker/`` imports itself
back in a circle.
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


MODULES = {module_name(p): imports_of(p) for p in sorted(WORKER.rglob("*.py"))}
RUNTIME = {module_name(p): imports_of(p, runtime_only=True) for p in sorted(WORKER.rglob("*.py"))}


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def offenders(
    importer_prefix: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()
) -> list[str]:
    bad = []
    for module, imported in MODULES.items():
        if not under(module, importer_prefix) or any(under(module, a) for a in allowed):
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
        "pipeline", "metrics", "health", "records", "resolver", "codec", "events", "inference",
        "models.onnx_embedder", "models.loading", "models.static", "model_making",
    )
)  # fmt: skip
# The model room's contract that chunking may read: what a model reference and a manifest are.
MODEL_CONTRACT = ("worker.models.reference", "worker.models.manifest")
ABOVE_MODELS = tuple(
    f"worker.{name}"
    for name in (
        "model_making", "inference", "config", "batcher", "metrics", "service", "consumer",
        "document", "publisher", "kafka", "cli", "chunking", "pipeline", "resources", "cgroups",
    )
)  # fmt: skip

RULES = [
    # (who, may not import, exempt modules, why)
    ("worker.chunking", IO, (), "chunking is pure: no Kafka, no inference runtime, no metrics"),
    (
        "worker.chunking",
        WORKER_SIDE,
        (),
        "chunking reads nothing of the worker (only the model contract: reference, manifest)",
    ),
    (
        "worker.chunking.text",
        (
            "worker.chunking.rules",
            "worker.chunking.semantic",
            "worker.chunking.contract",
            "worker.chunking.registry",
            "worker.chunking.strategies",
            "worker.chunking._native",
            "worker.models",
        ),
        (),
        "text analysis is the bottom room",
    ),
    (
        "worker.chunking.rules",
        (
            "worker.chunking.semantic",
            "worker.chunking.registry",
            "worker.chunking.strategies",
            "worker.models",
        ),
        (),
        "rule strategies need no model and know no registry",
    ),
    (
        "worker.chunking.semantic",
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
        "worker.chunking.contract",
        ("worker.chunking.registry", "worker.chunking.strategies"),
        (),
        "the contract sits below the registry and the strategies (no circle between them)",
    ),
    (
        "worker.chunking.strategies",
        ("worker.chunking.registry",),
        (),
        "the strategies know the contract, not the registry that lists them",
    ),
    (
        "worker.models",
        ABOVE_MODELS,
        (),
        "the run-time model room is the contract at the bottom: it knows no settings, batcher, "
        "metrics or model making",
    ),
    (
        "worker",
        ("worker.model_making",),
        ("worker.model_making", "worker.cli.models"),
        "only the CLI's model commands reach the offline model-making room",
    ),
    (
        "worker",
        ("worker.cli",),
        ("worker.cli",),
        "the CLI is the top: no module of the worker imports it",
    ),
    (
        "worker",
        ("aiokafka",),
        (
            "worker.kafka",
            "worker.consumer",
            "worker.consumer_client",  # the consumer's methods the loop uses (a Protocol)
            "worker.held",  # the consumer's records held at a pause: part of the loop
            "worker.unreadable",  # reads aiokafka's own tracebacks: part of the consumer edge
            "worker.publisher",
            "worker.document",
            "worker.service",
            "worker.cli.kafka_tools",  # the Kafka commands; chunking and model commands never
            "worker.sink",  # the reference sink: a consumer at the edge
            "worker.state",  # the state changelog's writes (Kafka errors)
            "worker.changelog",  # the state changelog's reader
            "worker.kafka_link",  # waiting for Kafka, watching it (Kafka errors)
            "worker.producers",  # the producer replaced when it breaks (its errors)
        ),
        "Kafka stays at the edge",
    ),
    (
        "worker",
        ("onnxruntime", "onnx", "safetensors"),
        (
            "worker.models.onnx_embedder",
            "worker.model_making.build",
            "worker.model_making.graph",
            "worker.model_making.encoder_passes",  # the encoder run for `model distill`
        ),
        "the inference runtime and the model build stay in the model rooms",
    ),
]
PURE = ("worker.offsets", "worker.batch_policy", "worker.backpressure", "worker.records",
        "worker.errors", "worker.events", "worker.pipeline", "worker.resolver", "worker.codec",
        "worker.loop_lag", "worker.connectivity", "worker.backlog")  # fmt: skip


@pytest.mark.parametrize(("who", "forbidden", "exempt", "why"), RULES, ids=[r[3] for r in RULES])
def test_import_rule(
    who: str, forbidden: tuple[str, ...], exempt: tuple[str, ...], why: str
) -> None:
    assert not offenders(who, forbidden, exempt), why


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io(module: str) -> None:
    io = (*IO, "tokenizers", "worker.kafka", "worker.consumer", "worker.service",
          "worker.publisher", "worker.health", "worker.models.onnx_embedder")  # fmt: skip
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_in_worker() -> None:
    # Imports that run (those under TYPE_CHECKING never do), inside functions included.
    graph = {m: {n for n in imported if n in RUNTIME} for m, imported in RUNTIME.items()}
    assert _circles(graph) == []


def test_the_circle_finder_finds_circles() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_rules_see_the_imports() -> None:
    # The checker itself must find what is there, or every rule passes vacuously.
    assert "aiokafka" in MODULES["worker.kafka"]
    assert "worker.chunking._native" in MODULES["worker.chunking.rules.adaptive"]
    assert "worker.chunking.strategies" in MODULES["worker.chunking.registry"]
    assert "worker.inference" in MODULES["worker.cli.chunking"]  # inside a function
    assert "worker.model_making.commands" in MODULES["worker.cli.models"]  # inside a function
    assert "aiokafka.errors" in MODULES["worker.cli.kafka_tools"]
    assert "worker.cli.chunking" in MODULES["worker.cli"]
    assert "onnxruntime" in MODULES["worker.models.onnx_embedder"]
    assert "worker.models.reference" in MODULES["worker.chunking.contract"]  # TYPE_CHECKING
    assert "worker.models.reference" not in RUNTIME["worker.chunking.contract"]
