"""The import rules of docs/architecture.md, enforced on the source (AST, every import,
including those inside functions).

worker/ is a house of rooms (sub-packages) layered bottom to top: each room imports only the
rooms below it (``ROOM_DEPENDS``). Kafka and the inference runtime stay at the edges; the chunking
rooms depend only downwards
(``text`` ← ``rules`` / ``semantic`` ← ``contract`` ← ``strategies`` ← ``registry``); the two model
rooms are the run-time contract at the bottom (``models``) and the offline model making above
it (``model_making``); pure modules import no I/O; and nothing in ``worker/`` imports itself
back in a circle.
"""

from __future__ import annotations

import ast

import pytest

from tests.support.import_graph import WORKER, imports_of, module_name

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

# The rooms of worker/ and the rooms each may import at run time (docs/architecture.md): a
# room's modules import only their own room and these. The map is a layering, bottom first;
# test_the_room_map_has_no_circle keeps it one. Imports under TYPE_CHECKING never run and are
# not counted (the sampler names the consume loop's type, one room up).
ROOM_DEPENDS: dict[str, tuple[str, ...]] = {
    "worker._version": (),
    "worker.errors": (),
    "worker.wordpiece": (),
    "worker.models": ("worker.errors", "worker.wordpiece"),
    "worker.chunking": ("worker.models", "worker.wordpiece", "worker.errors"),
    "worker.pipeline": ("worker.chunking",),
    "worker.config": ("worker.errors", "worker.models", "worker.chunking"),
    "worker.observability": ("worker._version",),
    "worker.wire": ("worker._version", "worker.errors", "worker.chunking"),
    "worker.runtime": (
        "worker.errors", "worker.config", "worker.models", "worker.chunking",
        "worker.observability",
    ),
    "worker.inference": (
        "worker.errors", "worker.config", "worker.models", "worker.chunking",
        "worker.observability", "worker.runtime",
    ),
    "worker.kafka": (
        "worker.errors", "worker.config", "worker.observability", "worker.runtime", "worker.wire",
    ),
    "worker.state": (
        "worker.errors", "worker.config", "worker.observability", "worker.runtime", "worker.wire",
        "worker.kafka",
    ),
    "worker.consuming": (
        "worker.errors", "worker.config", "worker.observability", "worker.runtime", "worker.wire",
        "worker.kafka", "worker.state",
    ),
    "worker.handling": (
        "worker.errors", "worker.config", "worker.observability", "worker.runtime", "worker.wire",
        "worker.kafka", "worker.state", "worker.chunking", "worker.pipeline", "worker.models",
        "worker.inference",
    ),
    "worker.model_making": ("worker.errors", "worker.models", "worker.chunking"),
    "worker.app": (
        "worker.errors", "worker.config", "worker.observability", "worker.runtime", "worker.wire",
        "worker.kafka", "worker.state", "worker.chunking", "worker.pipeline", "worker.models",
        "worker.inference", "worker.consuming", "worker.handling",
    ),
    "worker.cli": (
        "worker._version", "worker.errors", "worker.config", "worker.observability",
        "worker.runtime", "worker.wire", "worker.kafka", "worker.state", "worker.chunking",
        "worker.pipeline", "worker.models", "worker.inference", "worker.app",
        "worker.model_making", "worker.handling",  # tail maps table rows as the handler does
    ),
    "worker": ("worker._version",),  # the public surface imports its names on first use
}  # fmt: skip


def room_of(module: str) -> str:
    """The room a module of worker/ belongs to: its sub-package, or itself at the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return module
    top = f"{parts[0]}.{parts[1]}"
    return top if (WORKER / parts[1]).is_dir() else module


# Which modules may use Kafka's client library, by room and by module: the Kafka edge.
KAFKA_EDGE = (
    "worker.kafka",
    "worker.consuming.loop",
    "worker.consuming.commits",  # commits offsets and transactions: the consumer edge
    "worker.consuming.client",  # the consumer's methods the loop uses (a Protocol)
    "worker.consuming.prefetch",  # the consumer's records held at a pause: part of the loop
    "worker.consuming.unreadable",  # reads aiokafka's own tracebacks: the consumer edge
    "worker.handling.handler",  # a publish that fails for a transient reason is retried
    "worker.state.documents",  # the state changelog's writes (Kafka errors)
    "worker.state.changelog",  # the state changelog's reader
    "worker.app",
    "worker.cli.kafka_tools",  # the Kafka commands; chunking and model commands never
    "worker.cli.sink",  # the reference sink: a consumer at the edge
)

# The compiled cores: importable modules the seam alone loads (worker/chunking/_native).
CORES = sorted(p.name.split(".")[0] for p in (WORKER / "chunking" / "_native").glob("_*_core.c"))

RULES = [
    # (who, may not import, exempt modules, why)
    ("worker.chunking", IO, (), "chunking is pure: no Kafka, no inference runtime, no metrics"),
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
        ),
        (),
        "embedding strategies share text/, types and the cores' seam with the rule strategies",
    ),
    (
        "worker",
        tuple(f"worker.chunking._native.{core}" for core in CORES),
        (),
        "a compiled core is reached through the seam (worker/chunking/_native/__init__.py) only",
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
        "worker.chunking",
        ("worker.models.onnx_embedder", "worker.models.loading", "worker.models.static"),
        (),
        "chunking never loads or runs a model (it reads references and manifests)",
    ),
    (
        "worker",
        ("worker.model_making",),
        ("worker.model_making", "worker.cli.models"),
        "only the CLI's model commands reach the offline model-making room",
    ),
    ("worker", ("aiokafka",), KAFKA_EDGE, "Kafka stays at the edge"),
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
PURE = (
    "worker.wire", "worker.state.decisions", "worker.consuming.offsets",
    "worker.consuming.backpressure", "worker.inference.batch_policy", "worker.errors",
    "worker.pipeline", "worker.handling.resolver", "worker.runtime.loop_lag",
    "worker.kafka.link_policy", "worker.observability.backlog",
)  # fmt: skip
IO_MODULES = (
    *IO, "tokenizers", "worker.kafka.clients", "worker.consuming.loop", "worker.app",
    "worker.kafka.publisher", "worker.observability.health", "worker.models.onnx_embedder",
)  # fmt: skip


def test_every_room_is_in_the_map() -> None:
    rooms = {room_of(m) for m in RUNTIME}
    assert sorted(rooms - ROOM_DEPENDS.keys()) == []
    assert sorted(ROOM_DEPENDS.keys() - rooms) == []


@pytest.mark.parametrize("room", sorted(ROOM_DEPENDS))
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    allowed = {room, *ROOM_DEPENDS[room]}
    bad = sorted(
        f"{module} imports {name}"
        for module, imported in RUNTIME.items()
        if room_of(module) == room
        for name in imported
        if name in RUNTIME and room_of(name) not in allowed
    )
    assert not bad


def test_the_room_map_has_no_circle() -> None:
    assert _circles({room: set(deps) for room, deps in ROOM_DEPENDS.items()}) == []


@pytest.mark.parametrize(("who", "forbidden", "exempt", "why"), RULES, ids=[r[3] for r in RULES])
def test_import_rule(
    who: str, forbidden: tuple[str, ...], exempt: tuple[str, ...], why: str
) -> None:
    assert not offenders(who, forbidden, exempt), why


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io(module: str) -> None:
    bad = sorted(
        f"{name} (in {m})"
        for m, imported in MODULES.items()
        if under(m, module)
        for name in imported
        if any(under(name, f) for f in IO_MODULES)
    )
    assert not bad, f"{module} imports {bad}"


def test_only_kafka_py_constructs_kafka_clients() -> None:
    clients = {"AIOKafkaConsumer", "AIOKafkaProducer", "AIOKafkaAdminClient"}
    bad = []
    for path in sorted(WORKER.rglob("*.py")):
        if module_name(path) == "worker.kafka.clients":
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
    assert "aiokafka" in MODULES["worker.kafka.clients"]
    assert "worker.chunking._native" in MODULES["worker.chunking.rules.adaptive"]
    assert "worker.chunking.strategies" in MODULES["worker.chunking.registry"]
    assert "worker.inference.serving" in MODULES["worker.cli.chunking"]  # inside a function
    assert "worker.model_making.commands" in MODULES["worker.cli.models"]  # inside a function
    assert "aiokafka.errors" in MODULES["worker.cli.kafka_tools"]
    assert "worker.cli.chunking" in MODULES["worker.cli"]
    assert "onnxruntime" in MODULES["worker.models.onnx_embedder"]
    assert "worker.models.reference" in MODULES["worker.chunking.contract"]  # TYPE_CHECKING
    assert "worker.models.reference" not in RUNTIME["worker.chunking.contract"]
